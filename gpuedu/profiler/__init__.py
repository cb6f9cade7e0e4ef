"""The profiler: exact counters from the emulator, occupancy and a modelled GPU time."""
