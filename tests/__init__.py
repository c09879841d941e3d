"""vhd test suite (a package, so helpers import as ``tests.servers...``)."""
