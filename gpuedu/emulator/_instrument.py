"""Running a launch on a module's instrumented twin, and reading its counters.

While a ``Counting`` is active (``gpuedu.profile()`` starts one through ``hooks.counting``), every
launch goes to ``run(function, dims, argbuf)`` here, which

1. builds, once per module, the same source with ``compiler.build(..., profile=True)``:
   the twin, whose every load, store and basic block calls the counters in
   ``_native/gpuedu_profile.cpp``;
2. copies the module's ``__device__``/``__constant__`` variables into the twin, tells
   the counters where device memory lies, runs the grid on the twin, and copies the
   variables back, so that the learner's data sees exactly what a plain launch does;
3. returns the raw counts (``COUNTERS``), the races found and the instruction sites;

and the listener given to ``Counting`` hears of the launch as a ``LaunchRecord``.
"""
import ctypes
import os
import struct
import subprocess

from . import _memory

# Counter slots, in the order of gpuedu_profile.cpp's enum Counter.
COUNTERS = (
    "global_ld_requests", "global_st_requests", "global_atom_requests",
    "global_ld_sectors", "global_st_sectors", "global_atom_sectors",
    "global_ld_bytes", "global_st_bytes", "global_atom_bytes",
    "shared_ld_requests", "shared_st_requests", "shared_atom_requests",
    "shared_ld_wavefronts", "shared_st_wavefronts", "shared_atom_wavefronts",
    "shared_ld_ideal_wavefronts", "shared_st_ideal_wavefronts", "shared_atom_ideal_wavefronts",
    "divergent_branches", "warp_block_instances", "dram_read_sectors", "dram_write_sectors",
    "threads", "warps", "global_atom_lanes", "shared_atom_lanes",
    "global_red_requests", "global_red_sectors", "global_red_bytes", "global_red_lanes",
    "global_ld_lanes", "global_st_lanes", "shared_ld_lanes", "shared_st_lanes",
    "host_divergent_branches", "l2_lines", "dram_read_pairs", "barriers", "global_lines",
    "mma_sync",
    "local_ld_requests", "local_st_requests", "local_ld_sectors", "local_st_sectors",
    "local_ld_lanes", "local_st_lanes", "shuffles",
    "hmma_16816", "hmma_1688",
    "ldsm_requests", "ldsm_wavefronts", "ldsm_ideal_wavefronts",
    "ldgsts_requests", "ldgsts_wavefronts", "ldgsts_ideal_wavefronts", "ldgsts_lanes",
    "ldgsts_global_requests", "ldgsts_global_sectors",
    "wgmma",
    "tma_loads", "tma_load_bytes", "tma_stores", "tma_store_bytes", "mbarrier_waits", "tma_sectors", "wgmma_flops",
)

#: At most this many L2 sizes are modelled in one launch (gpuedu_profile.cpp's MAX_CAPACITIES, less the
#: L2 that never evicts, which gives dram_read_pairs).
MAX_L2_CAPACITIES = 7


L2_KEY_PREFIXES = ("dram_read_pairs_l2_", "dram_write_sectors_l2_")


def l2_keys(l2_bytes):
    """The raw counts the L2 model gives for an L2 of ``l2_bytes``: 64-byte pairs read from DRAM, and
    32-byte sectors written back to DRAM by the end of the launch."""
    return tuple(f"{prefix}{int(l2_bytes)}" for prefix in L2_KEY_PREFIXES)

#: gpuedu_profile.cpp's HazardKind: two threads with no barrier between them, or an access to shared bytes a
#: cp.async has issued and no wait of its thread has landed yet (the first access named is the cp.async).
HAZARD_KINDS = ("read-after-write", "write-after-read", "write-after-write", "read-before-wait", "write-before-wait")
SPACES = ("global", "shared")


class ProfilingUnavailable(Exception):
    """This launch cannot be profiled (with the reason): e.g. a module loaded from a file."""


class LaunchRecord:
    """What the emulator tells a listener of one launch: ``name``, ``grid``, ``block``, ``shared_dynamic`` (bytes),
    ``source`` (the module's source, options, no_extern_c and include folders, or None), ``target`` (the
    architecture the module was built for, ``arch=`` as given: "sm_90a", or None), and what was counted:
    ``counts`` {counter: int} (None where the launch could not be counted), ``hazards`` and ``errors`` [dict],
    ``seconds`` (the launch's time on this CPU), ``reason`` (why it was not counted) and ``error`` (how the
    launch failed, which then raises as it would unobserved)."""

    def __init__(self, name, grid, block, shared_dynamic, source=None, counts=None, hazards=(), errors=(),
                 seconds=None, reason=None, error=None, target=None):
        self.name, self.grid, self.block, self.shared_dynamic = name, grid, block, shared_dynamic
        self.target = target
        self.source, self.counts, self.seconds = source, counts, seconds
        self.hazards, self.errors = list(hazards), list(errors)
        self.reason, self.error = reason, error

    def __repr__(self):
        return f"<LaunchRecord {self.name} grid={self.grid} block={self.block}>"


class Counting:
    """While entered, every launch runs on its module's instrumented twin (``run``) and
    ``listener(LaunchRecord)`` hears of it; a launch that cannot be counted runs plainly and is heard of
    with the reason. Leaving it puts back whatever observed launches before (countings nest)."""

    def __init__(self, listener, racecheck=False, memcheck=False, l2_bytes=()):
        self.listener = listener
        self.racecheck = bool(racecheck)
        self.memcheck = bool(memcheck)
        self.l2_bytes = _capacities(l2_bytes)
        self._previous = None

    def __enter__(self):
        from ._module import set_launch_observer
        self._previous = set_launch_observer(self._observe)
        return self

    def __exit__(self, *exc):
        from ._module import set_launch_observer
        set_launch_observer(self._previous)
        return False

    def _observe(self, function, dims, argbuf):
        import time
        shape = struct.unpack_from("8I", dims)
        args = getattr(function.module, "_build_args", None)
        common = dict(grid=shape[0:3], block=shape[3:6], shared_dynamic=shape[6],
                      target=getattr(function.module, "_arch", None))
        source = None if args is None else args[:4]
        try:
            raw = run(function, dims, argbuf, racecheck=self.racecheck, memcheck=self.memcheck,
                      l2_bytes=self.l2_bytes)
        except ProfilingUnavailable as exc:
            start = time.perf_counter()
            function._run_on(function.module, function._info_address, dims, argbuf)
            self.listener(LaunchRecord(function.name, seconds=time.perf_counter() - start, reason=str(exc),
                                       **common))
            return
        except Exception as exc:
            self.listener(LaunchRecord(function.name, source=source, error=f"{type(exc).__name__}: {exc}",
                                       reason="the launch failed", **common))
            raise
        self.listener(LaunchRecord(function.name, source=source, counts=raw.counts, hazards=raw.hazards,
                                   errors=raw.errors, seconds=raw.seconds, **common))


class _Hazard(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("space", ctypes.c_int32), ("site_first", ctypes.c_uint32),
                ("site_second", ctypes.c_uint32), ("thread_first", ctypes.c_uint32),
                ("thread_second", ctypes.c_uint32), ("count", ctypes.c_uint64), ("where", ctypes.c_uint64)]


class _MemError(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int32), ("space", ctypes.c_int32), ("op", ctypes.c_int32),
                ("size", ctypes.c_uint32), ("site", ctypes.c_uint32), ("thread", ctypes.c_uint32),
                ("count", ctypes.c_uint64), ("offset", ctypes.c_int64), ("region", ctypes.c_uint64),
                ("region_bytes", ctypes.c_uint64)]


class Twin:
    """A module's instrumented build, loaded, with the variables it shares with the module."""

    def __init__(self, module, path):
        from ._module import Module
        self.module = Module(path)
        lib = self.module._lib
        lib.gpuedu_prof_configure.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                              ctypes.c_void_p]
        lib.gpuedu_prof_errors.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.gpuedu_prof_counters.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.gpuedu_prof_sites.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.gpuedu_prof_shared_ranges.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.gpuedu_prof_hazards.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.gpuedu_prof_l2_capacities.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.gpuedu_prof_l2.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.path = path
        self.base = _load_base(lib)
        ours, theirs = _variables(module._path), _variables(path)
        self.shared_variables = []   # (plain module address, twin address, size)
        for name, size in ours.items():
            if name in theirs and theirs[name] == size:
                self.shared_variables.append((_address(module._lib, name), _address(lib, name), size))
        self._lines = {}
        self.variables = _device_variables(lib)   # [(lo, hi, name)]: global memory, as allocations are

    def source_line(self, site_address):
        """``"kernel.cu:12"`` for an instruction's address in the twin, or None when unknown."""
        if site_address in self._lines:
            return self._lines[site_address]
        line = None
        try:
            out = subprocess.run(["addr2line", "-e", self.path, hex(site_address - self.base - 1)],
                                 capture_output=True, text=True, timeout=30)
            text = out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
            if text and not text.startswith("??"):
                fname, _, number = text.rpartition(":")
                number = number.split()[0]
                if number.isdigit() and number != "0":
                    line = f"{os.path.basename(fname)}:{number}"
        except (OSError, subprocess.TimeoutExpired, IndexError):
            line = None
        self._lines[site_address] = line
        return line


def twin_of(module):
    """The module's instrumented twin, built (and cached) on first use."""
    twin = getattr(module, "_profile_twin", None)
    if twin is not None:
        return twin
    args = getattr(module, "_build_args", None)
    if args is None:
        raise ProfilingUnavailable("the module was loaded from a file or a buffer, so its source is unknown; "
                                   "build it with SourceModule to profile it")
    from ._errors import CompileError
    from .compiler import build
    source, options, no_extern_c, include_dirs, cache = args
    try:
        path = build(source, options, no_extern_c, include_dirs, cache, profile=True, arch=getattr(module, "_arch", None))
    except CompileError as exc:
        # The plain build of this very source succeeded: the host compiler lacks what counting needs
        # (-fsanitize=thread, -fsanitize-coverage=trace-pc), which is no fault of the kernel.
        log = (exc.stderr or "").strip().splitlines()
        raise ProfilingUnavailable(f"the host compiler could not build the instrumented module ({exc.msg}"
                                   f"{': ' + log[0] if log else ''}); counting needs g++ or clang++ with "
                                   f"-fsanitize=thread and -fsanitize-coverage=trace-pc") from None
    twin = Twin(module, path)
    module._profile_twin = twin
    return twin


class RawRun:
    """What one instrumented launch counted: ``counts`` {name: int}, ``hazards`` [dict], ``errors`` [dict],
    ``seconds``."""

    def __init__(self, counts, hazards, seconds, errors=()):
        self.counts = counts
        self.hazards = hazards
        self.errors = list(errors)
        self.seconds = seconds


def _device_ranges():
    """Sorted [lo, hi) pairs of the live device allocations (not module variables)."""
    with _memory._lock:
        allocs = [_memory._by_start[a] for a in _memory._starts]
    pairs = [(a.address, a.address + a.size) for a in allocs if a.is_device_memory and a.size > 0]
    return pairs


def _capacities(l2_bytes):
    """The distinct L2 sizes to model, as ints, checked."""
    sizes = sorted({int(b) for b in l2_bytes})
    if any(b < 128 for b in sizes):
        raise ValueError(f"an L2 size is a number of bytes of at least one 128-byte line, got {sorted(l2_bytes)}")
    if len(sizes) > MAX_L2_CAPACITIES:
        raise ValueError(f"at most {MAX_L2_CAPACITIES} L2 sizes are modelled at once, got {len(sizes)}")
    return tuple(sizes)


def run(function, dims, argbuf, racecheck=False, memcheck=False, l2_bytes=()):
    """Launch ``function`` on its module's instrumented twin; return a RawRun (errors raise as a plain launch's).

    ``l2_bytes``: the L2 sizes whose DRAM traffic the counters model (``l2_keys`` names the counts)."""
    l2_bytes = _capacities(l2_bytes)
    import time
    twin = twin_of(function.module)
    symbol = function.name
    if symbol not in twin.module._kernels:
        raise ProfilingUnavailable(f"kernel '{symbol}' is missing from the instrumented build")
    info_address = twin.module._kernels[symbol][0]
    lib = twin.module._lib
    ranges = sorted([(lo, hi, None) for lo, hi in _device_ranges()] + twin.variables)
    pairs = [(lo, hi) for lo, hi, _ in ranges]
    flat = (ctypes.c_uint64 * (2 * len(pairs) or 1))(*[v for p in pairs for v in p])
    variable = (ctypes.c_uint8 * (len(ranges) or 1))(*[name is not None for _, _, name in ranges])
    lib.gpuedu_prof_configure(flat, len(pairs), int(bool(racecheck)), int(bool(memcheck)), variable)
    sizes = (ctypes.c_uint64 * (len(l2_bytes) or 1))(*l2_bytes)
    lib.gpuedu_prof_l2_capacities(sizes, len(l2_bytes))
    for ours, theirs, size in twin.shared_variables:
        ctypes.memmove(theirs, ours, size)
    start = time.perf_counter()
    try:
        # Racecheck looks for hazards between blocks too, in one shadow of every word: its blocks run on one
        # worker, in the grid's order. Counting (and memcheck) run them on every worker, as a plain launch does.
        function._run_on(twin.module, info_address, dims, argbuf, watch=not memcheck, one_worker=racecheck)
    finally:
        seconds = time.perf_counter() - start
        for ours, theirs, size in twin.shared_variables:
            ctypes.memmove(ours, theirs, size)
    out = (ctypes.c_uint64 * len(COUNTERS))()
    lib.gpuedu_prof_counters(out, len(COUNTERS))
    counts = dict(zip(COUNTERS, (int(v) for v in out)))
    l2 = (ctypes.c_uint64 * (2 * len(l2_bytes) or 1))()
    lib.gpuedu_prof_l2(l2, 2 * len(l2_bytes))
    for k, size in enumerate(l2_bytes):
        read_key, write_key = l2_keys(size)
        counts[read_key], counts[write_key] = int(l2[2 * k]), int(l2[2 * k + 1])
    from ._module import registers_by_warpgroup
    for group, registers in enumerate(registers_by_warpgroup(lib, info_address)):
        counts[f"setmaxnreg_wg{group}"] = registers   # (the largest setmaxnreg a warpgroup of a block asked for)
    hazards = _hazards(twin, ranges, dims) if racecheck else []
    errors = _errors(twin, ranges, dims) if memcheck else []
    return RawRun(counts, hazards, seconds, errors)


def _thread_of(number, dims):
    """(block, thread) coordinates of a launch-wide thread number."""
    shape = struct.unpack_from("8I", dims)
    grid, block = shape[0:3], shape[3:6]
    b, t = divmod(number, block[0] * block[1] * block[2])
    return ((b % grid[0], b // grid[0] % grid[1], b // (grid[0] * grid[1])),
            (t % block[0], t // block[0] % block[1], t // (block[0] * block[1])))


def _read(table, ctype, per_entry=1):
    """``(count, array)`` of one of the counters' tables: ``table(None, 0)`` says how many entries it holds,
    ``table(array, count)`` copies them (``per_entry`` values of ``ctype`` each)."""
    n = table(None, 0)
    array = (ctype * max(per_entry * n, 1))()
    if n:
        table(array, n)
    return n, array


def _site_line(twin, site):
    n_sites, sites = _read(twin.module._lib.gpuedu_prof_sites, ctypes.c_uint64)
    return twin.source_line(int(sites[site])) if site < n_sites else None


def _global_region(ranges, index):
    """What global range ``index`` of a launch is: "allocation", or "__device__ variable NAME"."""
    name = ranges[index][2] if 0 <= index < len(ranges) else None
    return "allocation" if name is None else f"__device__ variable {name}"


def _errors(twin, ranges, dims):
    n, found = _read(twin.module._lib.gpuedu_prof_errors, _MemError)
    result = []
    for e in found[:n]:
        block, thread = _thread_of(e.thread, dims)
        result.append({"kind": ("out of bounds", "misaligned")[e.kind], "space": SPACES[e.space],
                       "access": ("read", "write", "atomic")[e.op], "size": int(e.size), "count": int(e.count),
                       "offset": int(e.offset), "region_bytes": int(e.region_bytes),
                       "region": (("dynamic" if e.region == 0 else "static") if e.space == 1
                                  else _global_region(ranges, int(e.region))),
                       "block": block, "thread": thread, "line": _site_line(twin, e.site)})
    return result


def _hazards(twin, ranges, dims):
    lib = twin.module._lib
    n, found = _read(lib.gpuedu_prof_hazards, _Hazard)
    if not n:
        return []
    n_sites, sites = _read(lib.gpuedu_prof_sites, ctypes.c_uint64)
    n_shared, shared = _read(lib.gpuedu_prof_shared_ranges, ctypes.c_uint64, per_entry=2)
    shape = struct.unpack_from("8I", dims)
    grid, block = shape[0:3], shape[3:6]
    nthreads = block[0] * block[1] * block[2]

    def thread(number):
        b, t = divmod(number, nthreads)
        return ((b % grid[0], b // grid[0] % grid[1], b // (grid[0] * grid[1])),
                (t % block[0], t // block[0] % block[1], t // (block[0] * block[1])))

    result = []
    for h in found:
        region, offset = h.where >> 40, h.where & ((1 << 40) - 1)
        if h.space == 0:
            lo, hi, name = ranges[region]
            where = {"allocation": lo, "allocation_bytes": hi - lo, "offset": offset}
            if name is not None:
                where["variable"] = name
        else:
            where = {"shared": "dynamic (extern __shared__)" if region == 0 else "static __shared__ variable",
                     "variable_bytes": int(shared[2 * region + 1] - shared[2 * region]), "offset": offset}
        first, second = thread(h.thread_first), thread(h.thread_second)
        result.append({
            "kind": HAZARD_KINDS[h.kind], "space": SPACES[h.space], "count": int(h.count), "where": where,
            "first": {"block": first[0], "thread": first[1], "line": twin.source_line(int(sites[h.site_first]))},
            "second": {"block": second[0], "thread": second[1],
                       "line": twin.source_line(int(sites[h.site_second]))},
        })
    return result


# ---- the module's variables ------------------------------------------------------------------
class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _load_base(lib):
    info = _DlInfo()
    libdl = ctypes.CDLL(None)
    libdl.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    address = ctypes.cast(lib.gpuedu_launch, ctypes.c_void_p).value
    libdl.dladdr(address, ctypes.byref(info))
    return info.dli_fbase or 0


def _address(lib, name):
    return ctypes.addressof(ctypes.c_char.in_dll(lib, name))


def _device_variables(lib):
    """``[(lo, hi, name)]`` of the twin's ``__device__`` variables (not ``__constant__``: a GPU reads those through
    its constant cache, which Nsight Compute does not count as global loads), from the table the profiled build
    holds (_scanner.variable_table)."""
    try:
        count = int(lib.gpuedu_prof_variable_count())
    except AttributeError:   # (a twin built before the table)
        return []
    if count <= 0:
        return []
    addresses = (ctypes.c_void_p * count).in_dll(lib, "gpuedu_prof_variable_address")
    sizes = (ctypes.c_uint64 * count).in_dll(lib, "gpuedu_prof_variable_bytes")
    names = (ctypes.c_char_p * count).in_dll(lib, "gpuedu_prof_variable_name")
    found = {}
    for k in range(count):
        lo, size = addresses[k] or 0, int(sizes[k])
        if lo and size:
            found[lo] = (lo, lo + size, names[k].decode(errors="replace"))
    return sorted(found.values())


def _variables(path):
    """{name: size} of the variables a module exports (its __device__ and __constant__ data): objects the process
    may write (a toolchain that links with full RELRO leaves constants such as typeinfo read-only; copying into
    them faulted), not the runtime's own nor what the compiler's rewrite adds (``__gpuedu_shared_key_*``: each
    module's own slots for its static __shared__ variables)."""
    from ._module import read_dynamic_symbols
    return {name: size for name, (size, is_object) in read_dynamic_symbols(path, writable=True).items()
            if is_object and size and not name.startswith("gpuedu_") and "__gpuedu" not in name}
