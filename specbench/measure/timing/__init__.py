"""How a unit is timed on a shared machine: the timing protocol, the machine's state around it and the energy counters."""
