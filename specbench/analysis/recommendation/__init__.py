"""The recommender: per scenario, the best drafter, tree and γ — or no speculation — from measured speedups
(`measured`) or a cost profile's (`profiled`), the result as a value and its words and JSON (`result`), the
entry point (`recommend`), dynamic schedules against the best fixed γ (`schedule_comparison`) and the
recommendation confirmed on fresh prompts (`confirmation`).
"""
