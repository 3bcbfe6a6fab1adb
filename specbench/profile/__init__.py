"""Profile: cost profiles measured from an architecture alone (random weights), `specbench profile`.

Owns the command's measurement: timing verify(k) and draft steps per batch size and context
length on a device, and writing the profile folder that ``recommend --cost-profile`` reads.
It may import the engine, the model loaders, analysis (to fit what it measured) and records.
"""
