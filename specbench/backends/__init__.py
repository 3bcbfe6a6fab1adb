"""Backends: the seam between a sweep and whatever generates tokens.

Each backend turns one configuration (drafter, γ, tree, temperature) and a prompt into a
generation result with the same fields, so every backend writes the same records. Today:
specbench's own engine in this process. A backend may import the engine and the model
loaders; it never imports measure, analysis, figures or the CLI.
"""
