"""Figure families: one module per kind of figure a results folder gets (`specbench.figures.plot` lists them)."""
