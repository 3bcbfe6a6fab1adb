"""Running a sweep: the runner (unit order, resume, shards) and the policies it drives (adaptive looks, confirmation)."""
