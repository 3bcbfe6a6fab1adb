"""The cost side: the per-round cost model fitted to timings (`round_cost`), where costs come from (`source`:
the sweep's own or a profile's, `profile`), expert-aware costs of MoE targets (`moe`) and the predicted
speedup, acceptance × cost (`predicted_speedup`).
"""
