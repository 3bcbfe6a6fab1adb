"""`FigureSkipped`: a figure's data are absent (shared by the figure modules)."""


class FigureSkipped(Exception):
    """The data a figure needs are absent; the message says which (one line)."""
