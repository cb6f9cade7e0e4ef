"""Nsight Compute's view of a kernel without a GPU: counters, races, occupancy and a modelled GPU time.

``gpuedu.profile()`` (session.py) records every launch made in a ``with`` block; the
emulator's instrumented build counts what the hardware's counters count (metrics.py
names them as ``ncu`` does), the real compiler gives registers and shared memory
(resources.py), the occupancy calculator's rules give occupancy (occupancy.py), and a
stated roofline model (time_model.py, with the GPUs of gpus.py) turns counts into a
*modelled* time, never to be read as a measurement.
"""
from .session import KernelRecord, Profile, memcheck, profile, racecheck

__all__ = ["KernelRecord", "Profile", "memcheck", "profile", "racecheck"]
