"""Where a sweep's work runs: pieces of work, the worker that turns one into records, the in-process and Ray executors, and the one writer."""
