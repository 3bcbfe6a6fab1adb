"""Training trained drafters (Medusa, EAGLE, EAGLE-3, MTP) by self-distillation from a target."""
