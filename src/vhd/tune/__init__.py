"""Soft-prompt tuning (``vhd tune``): learn a pseudo-word S* that makes a VLM a better harmfulness detector.

The S* checkpoint format and the splice live in `vhd.backends.soft_prompt` (the ``tuned-vlm``
detector reads them too); this room holds the training data rules (`vhd.tune.data`) and the
training loop (`vhd.tune.train`).
"""
