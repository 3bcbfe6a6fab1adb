"""Verdicts: confident yes, confident no or cannot tell, as typed values (`verdict`).

The per-scenario decision (`decision`), the stopping rule of an adaptive sweep and its history (`stopping`,
`stopping_history`, `stopping_report`; their error rates by simulation: `specbench.analysis.simulation`). A recommendation confirmed on fresh prompts is
`specbench.analysis.recommendation.confirmation`.
"""
