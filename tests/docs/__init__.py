"""Tests of the documentation site in docs/ (and what README.md keeps)."""
