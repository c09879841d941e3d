"""Real local servers used by tests and benchmarks."""
