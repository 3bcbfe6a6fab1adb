"""Drafter checkpoints on disk: where one named by checkpoint= lives, the own folder format, published layouts, the speculators format."""
