"""Records: the results store and what reads it back.

Owns the Parquet record schema, the atomic (and locked) results folder, ``run.json``, the
flattening of records into per-round arrays, merging of folders and the per-configuration
summary. Every later stage (analysis, figures) reads measurements only through this package.
It imports nothing of specbench but ``specbench.errors``: no torch, no model, no engine.
"""
