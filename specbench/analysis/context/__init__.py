"""Context length as a decision axis: the verdict per context-length bin, where speculation stops paying along
the prompt's length (the crossover), and a setting with γ per context range (docs/context-length.md)."""
