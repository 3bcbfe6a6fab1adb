"""Catalogue: what specbench knows about each named kind, readable from every layer.

Owns the registry mechanism (`specbench.catalogue.registry.Registry`: names → entries, did-you-mean
lookups, implementations imported on first use) and the drafter catalogue
(`specbench.catalogue.drafters`: one entry per drafter kind with every fact any layer asks). It is the
bottom layer: it imports nothing of specbench but ``specbench.errors``, and no torch, so records,
analysis and the CLI's help read it as cheaply as the engine does.
"""
