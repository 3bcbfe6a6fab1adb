"""Where a workload's prompts come from: package data, local files and the hub, prepared folders other projects write, ShareGPT, SPEED-Bench."""
