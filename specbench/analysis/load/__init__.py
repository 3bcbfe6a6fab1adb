"""Serving under load: the per-load table (`table`), the verdict at each load and vLLM's per-batch-size
schedule (`verdicts`), crossovers (`crossover`), latency targets (`slo`), goodput, cost and energy per load
(`operating`, `goodput`).
"""
