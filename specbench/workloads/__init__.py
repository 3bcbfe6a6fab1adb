"""Workloads: prompt sets as data.

The catalogue of built-in workloads (`catalog`), the workload file format (`spec`, read through `spec_reader`),
where prompts come from (`sources`: data packages, JSONL files, Hugging Face datasets), the prepared sets
(`prepared*`, SPEED-Bench, speculator benchmarks), long-context prompts, ShareGPT conversations and streams
of shifting traffic. A `Prompt` is what every other package receives. It imports models (tokenizers and
prompting) and errors only; measure, training and the CLI read it.
"""
