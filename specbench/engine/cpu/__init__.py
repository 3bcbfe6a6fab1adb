"""The CPU side of the engine, measured on the machine at hand: what the CPU can do, torch threads, the weight layout and its probe."""
