"""Named static tree shapes (rank-path YAML files), installed as ``specbench.builtin_trees``."""
