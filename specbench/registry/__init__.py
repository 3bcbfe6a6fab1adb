"""Data files shipped with the package (model aliases)."""
