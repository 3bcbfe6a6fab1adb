"""Analysis: records in, fits and recommendations out.

Owns the acceptance model (α by maximum likelihood, per-position rates), the cost model
(t_verify(k), t_draft), intervals (prompt-cluster bootstrap, exact binomial), the recommender
and the serving-engine settings it prints, and costs taken from hardware profiles. It may
import ``specbench.records`` and ``specbench.errors`` only: never the engine, the model
loaders or torch, so ``fit`` and ``recommend`` run on any machine that has the results folder.
"""
