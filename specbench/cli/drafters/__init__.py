"""The commands that make drafters rather than measure them: `train-drafter` and `export-drafter` (they change with specbench.training)."""
