"""Serving-engine batches: which units run together (groups), one batch's arrivals and start (batches), open-loop schedules (arrivals)."""
