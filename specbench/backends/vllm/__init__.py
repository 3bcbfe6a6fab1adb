"""vLLM as a backend: its offline engine in a worker process, its launched server, the config a sweep asks of it, its answers, where its environment is."""
