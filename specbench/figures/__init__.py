"""Figures: records and fits in, matplotlib figures and a self-contained HTML report out.

Owns the plots, the report and the palette (one colour per drafter, one line style per tree).
It may import ``specbench.analysis``, ``specbench.records`` and ``specbench.errors``; never the
engine, the model loaders or torch.
"""
