"""The sweep specification: a YAML file or flags merged (`flags`) into a checked `SweepSpec` (`sweep`).

Its parts: the adaptive plan (`adaptive`), the executor choice (`executor`), round strategies (`strategy`,
`online_strategy`), value checks (`values`, `validate`), the grid of units (`units`) and the dry-run estimate
(`estimate`). Nothing here runs a model.
"""
