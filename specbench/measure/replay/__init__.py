"""Offline replay: every γ of a chain derived from one target trajectory (`replayer`) and the replay units
(`units`) of a sweep in mode replay or both (docs/replay.md).
"""
