"""One colour per drafter label, one line style per tree shape — the same in every figure.

The mapping is deterministic: labels are sorted and take the colours of `COLOURS` in order
(Okabe–Ito, colour-blind safe, then a few distinct extras; beyond those the list repeats), so
a label keeps its colour across all figures of a report and across re-renders of the same
results. The target-only baseline ('none') is always grey.
"""

from __future__ import annotations

BASELINE_LABEL = "none"
BASELINE_COLOUR = "#555555"
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#8C564B", "#7F7F00", "#9467BD", "#17BECF")
TREE_STYLES = (("--", "s"), (":", "^"), ("-.", "D"), ((0, (5, 1, 1, 1)), "v"))
CHAIN = "chain"


class Palette:
    """Colours per drafter label and (line style, marker) per tree shape."""

    def __init__(self, labels, trees=()):
        drafters = sorted({str(label) for label in labels} - {BASELINE_LABEL})
        self._colours = {label: COLOURS[i % len(COLOURS)] for i, label in enumerate(drafters)}
        self._colours[BASELINE_LABEL] = BASELINE_COLOUR
        shapes = sorted({str(tree) for tree in trees} - {CHAIN})
        self._trees = {tree: TREE_STYLES[i % len(TREE_STYLES)] for i, tree in enumerate(shapes)}
        self._trees[CHAIN] = ("-", "o")

    @property
    def labels(self) -> list[str]:
        """The drafter labels with a colour of their own (baseline excluded), in colour order."""
        return [label for label in self._colours if label != BASELINE_LABEL]

    def colour(self, label: str) -> str:
        """The label's colour; an unknown label gets the baseline grey."""
        return self._colours.get(str(label), BASELINE_COLOUR)

    def style(self, label: str, tree: str = CHAIN) -> dict:
        """Matplotlib keyword arguments (color, linestyle, marker) for one (drafter, tree) series."""
        linestyle, marker = self._trees.get(str(tree), ("-", "o"))
        return {"color": self.colour(label), "linestyle": linestyle, "marker": marker}
