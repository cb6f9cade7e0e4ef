"""The emulator's public face for the tools built on it: the profiler, ``gpuedu.trace()``, preflight,
``gpuedu doctor`` and the benchmarks reach the emulator's core through these names and no others (a test
fails if anything outside ``gpuedu/emulator/`` imports one of its underscore modules).

- **Counted launches.** ``with counting(listener, racecheck=False, memcheck=False, l2_bytes=()):`` runs every
  launch on its module's instrumented twin, which counts what Nsight Compute counts, and calls ``listener``
  with a ``LaunchRecord`` for each (``COUNTERS`` names the counts; ``l2_keys(size)`` the DRAM traffic the
  L2 model gives for each L2 size in ``l2_bytes``). A launch that cannot be counted (a module
  loaded from a file, a compiler without ``-fsanitize=thread``) runs plainly and its record says why.
- **Activity.** ``record_activity(recorder)`` makes ``recorder(kind, info)`` hear of every call a GPU would
  queue or wait on (copies, launches, events, synchronisations) with its stream; ``emit_activity`` adds a
  host-side mark (``gpuedu.range``).
- **The kernel cache.** ``cache_dir()`` (created, checked, the folder in use), ``cache_path()`` (by the rule,
  untouched) and ``cache_problem(path)`` (why a folder cannot be trusted, or None); ``CacheDamageWarning``,
  the one line said when something kept in it was damaged and is made again.
- **PyCUDA's API on the CPU, whatever the backend.** ``driver`` and ``compiler``, the emulator's
  ``pycuda.driver`` and ``pycuda.compiler``, for what must run on the emulator on a GPU machine too: the
  exercise checks judge a kernel's method (counters, racecheck) there after its values on the GPU.
- **Tensor maps.** ``encode_tensor_map(...)``, the emulator's ``cuTensorMapEncodeTiled`` (the driver's arguments,
  the map's 128 bytes as ``_native/gpuedu_tma.h`` reads them), and ``TensorMapError``, what it refuses:
  ``gpuedu.tma`` checks every map with it, and uses its bytes when the tensor lives in the emulator's memory
  (``holds_address(address)``: whether an address is the emulator's device memory).
"""
from . import compiler, driver
from ._activity import emit as emit_activity
from ._activity import set_recorder as record_activity
from ._cache import CacheDamageWarning, cache_dir, cache_path, cache_problem
from ._instrument import COUNTERS, L2_KEY_PREFIXES, MAX_L2_CAPACITIES, LaunchRecord, ProfilingUnavailable, l2_keys
from ._instrument import Counting as counting
from ._memory import holds as holds_address
from ._tensormap import TensorMapError
from ._tensormap import encode_tiled as encode_tensor_map

__all__ = ["COUNTERS", "L2_KEY_PREFIXES", "MAX_L2_CAPACITIES", "l2_keys", "LaunchRecord", "ProfilingUnavailable", "counting",
           "record_activity", "emit_activity", "cache_dir", "cache_path", "cache_problem", "CacheDamageWarning",
           "compiler", "driver", "encode_tensor_map", "TensorMapError", "holds_address"]
