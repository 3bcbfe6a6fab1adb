"""Statistics: bootstrap and binomial intervals (`intervals`), the paired speedup's t-interval
(`speedup_interval`) and the group-sequential rule an adaptive sweep looks by (`sequential`).
"""
