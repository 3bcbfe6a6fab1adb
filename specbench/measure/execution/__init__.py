"""Running a sweep: the runner (resume, shards, the unit order) and what it drives.

Pieces of work (`pieces`) go to an executor (`executor`: in process; `ray_executor`: a Ray cluster), a worker
measures them through a backend (`worker`, `groups`, `batches`, `arrivals`) under the timing protocol
(`timing_protocol`, `machine_state`) and energy counters (`energy`). An adaptive sweep's looks and a
confirmation's are policies the runner drives (`policy`, `adaptive`, `confirm`).
"""
