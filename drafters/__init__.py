"""Trained drafters shipped with specbench, installed as ``specbench.builtin_drafters``.

Layout: ``<target>/<type>/{config.json, model.safetensors}`` (see docs/drafters.md); the name
``<target>/<type>`` is what ``checkpoint=`` accepts, and a drafter without a checkpoint uses the
one shipped for its target.
"""
