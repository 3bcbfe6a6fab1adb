"""Measure: sweep spec → grid of units → runs → records.

Owns the sweep specification (YAML or flags), the grid, the runner (resume, shards, the
unit order), offline replay, the dry-run estimate, the environment a run records, and the
workloads (prompt sets as data). It drives measurements through ``specbench.backends`` and
writes them with ``specbench.records``; it never imports the CLI.
"""
