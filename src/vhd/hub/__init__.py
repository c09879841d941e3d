"""Sharing a dataset with the tools users already run: Hugging Face ``datasets`` and the hub.

Importing this package is cheap; `vhd.hub.hf` loads ``datasets`` only when an export runs.
"""
