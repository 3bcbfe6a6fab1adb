"""Built-in workload definitions (YAML), installed as ``specbench.builtin_workloads``."""
