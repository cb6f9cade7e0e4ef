"""``Module`` and ``Function``: a compiled kernel library, and launching its kernels.

A module is the shared library ``compiler.build`` made; it exports a table of
kernels (entry point, parameter sizes, alignments and kinds, whether the
threads need fibers) and one launch entry, ``gpuedu_launch``.  ``Function``
packs PyCUDA-style arguments into CUDA's parameter layout, checks the launch
against the device's limits, runs the grid (synchronously) and turns the
runtime's error codes into the exceptions PyCUDA raises.
"""
import ctypes
import os
import struct
import sys
import threading
import time
import weakref

import numpy as np

from . import _activity, _cache, _device, _memory
from ._cache import cache_dir
from ._alloc import device_pointer
from ._args import ArgumentHandler
from ._errors import LaunchError, LogicError

# ---- error codes and layout shared with _native/gpuedu_runtime.h ----------------------------
OK, FAULT, BARRIER_PARTIAL, DEADLOCK, INTERRUPT, TIMEOUT, LOOP_BARRIER, WARP_EXITED, WARP_MISMATCH, \
    STACK_OVERFLOW, ASSERT, TOO_MUCH_SHARED, DIVIDE_BY_ZERO, SIGNALLED, STACK_SMASHED, DEVICE_MISUSE, \
    DYNAMIC_SHARED_OVERRUN, STATIC_SHARED_OVERRUN = range(18)
KIND_POINTER, KIND_INTEGER, KIND_FLOAT, KIND_STRUCT = 1, 2, 3, 4
_KIND_NAMES = {KIND_POINTER: "pointer", KIND_INTEGER: "integer", KIND_FLOAT: "floating-point",
               KIND_STRUCT: "struct"}


#: The most blocks a cluster holds (cudaOccupancyMaxPotentialClusterSize's portable limit; 16 needs the
#: non-portable attribute, which the emulator does not take).
MAX_CLUSTER_BLOCKS = 8


class _KernelInfo(ctypes.Structure):
    _fields_ = [("run", ctypes.c_void_p), ("address", ctypes.c_void_p), ("name", ctypes.c_char_p),
                ("needs_fibers", ctypes.c_int), ("nparams", ctypes.c_int), ("sizes", ctypes.POINTER(ctypes.c_int)),
                ("aligns", ctypes.POINTER(ctypes.c_int)), ("kinds", ctypes.POINTER(ctypes.c_int)),
                ("pointees", ctypes.POINTER(ctypes.c_int)), ("cluster", ctypes.c_uint * 3)]


class _ErrorInfo(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("block", ctypes.c_uint * 3), ("thread", ctypes.c_uint * 3),
                ("fault_is_write", ctypes.c_int), ("fault_address", ctypes.c_ulonglong),
                ("message", ctypes.c_char * 768)]


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


_libdl = ctypes.CDLL(None)
_dladdr = _libdl.dladdr
_dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
_dladdr.restype = ctypes.c_int


# ---- the thread order (teaching aid) and other run-time settings ------------------------------
SCHEDULES = {"forward": 0, "reverse": 1, "random": 2}
_launch_lock = threading.Lock()
_settings = {"schedule": 0, "seed": 0}


def set_schedule(order, seed=0):
    """The order a block's threads run in (see ``compiler.set_schedule``); ``seed`` fixes "random"."""
    if order not in SCHEDULES:
        raise ValueError(f"unknown schedule {order!r}; use one of {sorted(SCHEDULES)}")
    _settings["schedule"] = SCHEDULES[order]
    _settings["seed"] = int(seed)


def get_schedule():
    """The current order: "forward", "reverse" or "random"."""
    return {v: k for k, v in SCHEDULES.items()}[_settings["schedule"]]


def _from_environment(name, apply, default):
    """Apply ``$name`` (or ``default`` when unset) with ``apply``; a value it refuses is an error that names it."""
    value = os.environ.get(name, "") or default
    try:
        apply(value)
    except ValueError as exc:
        raise ValueError(f"the environment variable {name}={os.environ.get(name)!r} cannot be used: {exc}. "
                         f"Unset it or give it a valid value.") from None


_from_environment("GPUEDU_SCHEDULE", set_schedule, "forward")
_force_fibers = 0


def _set_fibers(value):
    global _force_fibers
    if value not in ("always", "auto"):
        raise ValueError(f"GPUEDU_FIBERS takes 'always' (every kernel's threads as fibers) or 'auto' (only where "
                         f"the kernel reaches a barrier or a warp intrinsic), not {value!r}")
    _force_fibers = 1 if value == "always" else 0


_from_environment("GPUEDU_FIBERS", _set_fibers, "auto")


def set_kernel_timeout(seconds):
    """Stop any launch that runs longer than ``seconds`` with a LaunchError (None: no limit).

    ``GPUEDU_KERNEL_TIMEOUT`` (seconds) sets it when the emulator is imported.
    """
    if seconds is not None:
        try:
            seconds = float(seconds)
        except (TypeError, ValueError):
            raise ValueError(f"the kernel timeout must be a number of seconds (or None), got {seconds!r}") from None
        if not seconds > 0:
            raise ValueError(f"the kernel timeout must be positive seconds or None, got {seconds!r}")
    _settings["timeout"] = seconds


def get_kernel_timeout():
    """The current kernel timeout in seconds (a float), or None when launches have no limit."""
    return _settings["timeout"]


_from_environment("GPUEDU_KERNEL_TIMEOUT", set_kernel_timeout, None)

MAX_WORKERS = 64   # host::MAX_WORKERS (gpuedu_host.h)


def available_cores():
    """The CPU cores this process may run on (its affinity, which a container's limit narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def set_threads(count):
    """Run a launch's blocks on ``count`` worker threads at once (None: one per core this process may use; 1: one
    after another, in the grid's order). ``GPUEDU_THREADS`` sets it when the emulator is imported.

    Blocks are independent by CUDA's rules, so results do not depend on it, except where a kernel's blocks race
    (atomics in an order, a value one block writes and another reads), as on a GPU. The profiler's counted
    launches (``gpuedu.profile()``, memcheck) run on as many, and count the same with any number (but for blocks
    that depend on each other's timing, such as a last-block-finishes reduction: which block does that work then
    depends on the workers, as on a GPU, and so does the modelled DRAM traffic); racecheck's,
    which look for hazards between blocks, and modules with launches from device code run on one."""
    if count is None or count == "" or count == "auto":
        count = min(available_cores(), MAX_WORKERS)   # (a machine with more cores uses the first 64)
    try:
        count = int(count)
    except (TypeError, ValueError):
        raise ValueError(f"the number of worker threads must be a whole number from 1 to {MAX_WORKERS} (or "
                         f"'auto': one per core), got {count!r}") from None
    if not 1 <= count <= MAX_WORKERS:
        raise ValueError(f"the number of worker threads must be from 1 to {MAX_WORKERS} (or 'auto': one per "
                         f"core), got {count}")
    _settings["threads"] = count


def get_threads():
    """How many worker threads a launch's blocks run on."""
    return _settings["threads"]


_from_environment("GPUEDU_THREADS", set_threads, "auto")


# What runs each launch instead of the plain module, while one is set: gpuedu.profile()'s
# recorder, called as observer(function, dims, argbuf) (see set_launch_observer).
_observer = [None]


def set_launch_observer(observer):
    """Route every launch through ``observer(function, dims, argbuf)`` (None: launch plainly); returns the
    previous one. The observer runs the launch itself, with ``function._run_on``."""
    previous = _observer[0]
    _observer[0] = observer
    return previous


# ---- modules -----------------------------------------------------------------------------------

class _StackPool(ctypes.Structure):
    # Mirrors __gpuedu::StackPool: the first module that needs fibers maps the
    # stacks and records them here; every other module reuses them.
    _fields_ = [("base", ctypes.c_void_p), ("bytes", ctypes.c_size_t), ("stride", ctypes.c_size_t),
                ("launch_base", ctypes.c_void_p), ("launch_bytes", ctypes.c_size_t)]


_STACK_POOLS = (_StackPool * MAX_WORKERS)()   # one per worker thread


class _Workers(ctypes.Structure):
    # Mirrors __gpuedu::host::Workers: the process's pool of worker threads, started by the first launch that
    # runs on several.
    _fields_ = [("impl", ctypes.c_void_p), ("states", (ctypes.c_void_p * MAX_WORKERS) * 2)]


_WORKERS = _Workers()
_POINTER = struct.Struct("P")
_NO_ADDRESS = 2    # ErrorInfo.fault_is_write when the CPU gave no address (gpuedu_host.h)


class _Heap(ctypes.Structure):
    # Mirrors __gpuedu::host::Heap: the device heap that malloc and new in kernels draw from, one for the
    # process (every module is handed it); ``limit`` is Context.set_limit(limit.MALLOC_HEAP_SIZE, ...).
    _fields_ = [("blocks", ctypes.c_void_p), ("limit", ctypes.c_size_t), ("used", ctypes.c_size_t)]


HEAP = _Heap(None, 8 << 20, 0)

# printf's FIFO per launch (Context.set_limit(limit.PRINTF_FIFO_SIZE, ...)), handed to every module loaded.
_printf_limit = [1 << 20]
_modules = weakref.WeakSet()


def _after_fork_in_child():
    """A child made by os.fork() (multiprocessing's 'fork' start method too) launches with the same checks as its
    parent: the locks a thread of the parent held mid-launch or mid-allocation are made afresh (the thread is not
    there to release them), and every loaded module's host side forgets a launch the parent was running, putting
    back the signal handlers it had installed for it. The worker pool and the fault handlers are made again by the
    child's first launch (gpuedu_host.cpp)."""
    global _launch_lock
    _launch_lock = threading.Lock()
    _memory.after_fork_in_child()
    for module in list(_modules):
        forget = getattr(module._lib, "gpuedu_after_fork", None)
        if forget is not None:
            forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def set_printf_limit(nbytes):
    """Keep at most ``nbytes`` of a launch's printf output, as a GPU's printf FIFO does (1 MiB by default)."""
    _printf_limit[0] = int(nbytes)
    for module in list(_modules):
        module._printf_limit.value = _printf_limit[0]


class Module:
    """A loaded kernel library (what ``SourceModule`` returns)."""

    def __init__(self, library_path):
        self._path = library_path
        lib = ctypes.CDLL(library_path)
        self._lib = lib
        lib.gpuedu_launch.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_ulonglong,
                                        ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.gpuedu_launch.restype = ctypes.c_int
        lib.gpuedu_take_output.restype = ctypes.c_void_p
        lib.gpuedu_error.restype = ctypes.POINTER(_ErrorInfo)
        lib.gpuedu_kernel_table.restype = ctypes.c_void_p
        lib.gpuedu_request_stop.argtypes = [ctypes.c_int]
        lib.gpuedu_heap_holds.argtypes = [ctypes.c_void_p]
        lib.gpuedu_running_kernel.restype = ctypes.c_char_p
        lib.gpuedu_static_shared.argtypes = [ctypes.c_void_p]
        lib.gpuedu_static_shared.restype = ctypes.c_size_t
        lib.gpuedu_registers_requested.argtypes = [ctypes.c_void_p]
        lib.gpuedu_registers_requested.restype = ctypes.c_uint
        lib.gpuedu_registers_by_warpgroup.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint), ctypes.c_int]
        lib.gpuedu_shared_place.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_ulonglong),
                                             ctypes.POINTER(ctypes.c_char_p)]
        lib.gpuedu_use_stack_pool.argtypes = [ctypes.c_void_p]
        lib.gpuedu_use_stack_pool(ctypes.addressof(_STACK_POOLS))
        lib.gpuedu_use_workers.argtypes = [ctypes.c_void_p]
        lib.gpuedu_use_workers(ctypes.addressof(_WORKERS))
        # One worker for a module whose source said so (_scanner's SINGLE_WORKER_SYMBOL), and off Linux.
        try:
            self.single_worker = bool(ctypes.c_int.in_dll(lib, "gpuedu_single_worker").value)
        except ValueError:
            self.single_worker = not sys.platform.startswith("linux")
        lib.gpuedu_use_heap.argtypes = [ctypes.c_void_p]
        lib.gpuedu_use_heap(ctypes.addressof(HEAP))
        self._printf_len = ctypes.c_size_t.in_dll(lib, "gpuedu_printf_len")
        self._printf_dropped = ctypes.c_size_t.in_dll(lib, "gpuedu_printf_dropped")
        self._printf_limit = ctypes.c_size_t.in_dll(lib, "gpuedu_printf_limit")
        self._printf_limit.value = _printf_limit[0]
        _modules.add(self)
        self._error = lib.gpuedu_error().contents
        count = lib.gpuedu_kernel_count()
        table = lib.gpuedu_kernel_table()
        self._kernels = {}       # symbol name -> (_KernelInfo address, info)
        self._plain = {}         # plain source name -> its symbol names (several for overloads)
        for i in range(count):
            address = table + i * ctypes.sizeof(_KernelInfo)
            info = _KernelInfo.from_address(address)
            plain = info.name.decode()
            symbol = _symbol_name(info.address) or plain
            self._kernels[symbol] = (address, info)
            self._plain.setdefault(plain, []).append(symbol)

    def get_function(self, name):
        """The kernel called ``name`` (its C++ mangled name for kernels without extern "C")."""
        if name in self._kernels:
            address, info = self._kernels[name]
            return Function(self, name, address, info)
        if name in self._plain and len(self._plain[name]) > 1:
            from ._linkcheck import _demangle
            readable = _demangle(self._plain[name])
            versions = ", ".join(f"'{symbol}' ({readable[symbol]})" for symbol in self._plain[name])
            raise LogicError(
                f"cuModuleGetFunction failed: named symbol not found: kernel '{name}' is overloaded (C++ linkage), "
                f"so each version has its own name in the module: {versions}. Call get_function with one of them.")
        if name in self._plain:
            symbol = self._plain[name][0]
            raise LogicError(
                f"cuModuleGetFunction failed: named symbol not found: kernel '{name}' has C++ linkage, so its "
                f"name in the module is '{symbol}'. Declare it extern \"C\" __global__ void {name}(...) or "
                f"call get_function('{symbol}').")
        known = ", ".join(sorted(self._kernels)) or "none"
        raise LogicError(f"cuModuleGetFunction failed: named symbol not found: no kernel '{name}' in this "
                         f"module (kernels: {known})")

    def get_global(self, name):
        """``(pointer, size_in_bytes)`` of a ``__device__`` or ``__constant__`` variable."""
        try:
            address = ctypes.addressof(ctypes.c_char.in_dll(self._lib, name))
        except ValueError:
            raise LogicError(f"cuModuleGetGlobal failed: named symbol not found: no __device__ or __constant__ "
                             f"variable '{name}' in this module") from None
        size = _symbol_size(self._path, name)
        _memory.register_external(address, size)  # so the driver's checked copies accept it
        return GlobalPointer(address, size), size

    def get_texref(self, name):
        raise LogicError("texture references are not supported by the CPU emulator (and are deprecated in CUDA)")

    def get_surfref(self, name):
        raise LogicError("surface references are not supported by the CPU emulator")

    def _take_output(self):
        text = ctypes.string_at(self._lib.gpuedu_take_output())
        sys.stdout.write(text.decode("utf-8", "replace"))
        dropped, self._printf_dropped.value = self._printf_dropped.value, 0
        if dropped:
            sys.stdout.flush()
            sys.stderr.write(f"(printf: {dropped:,} more bytes of this launch's output were dropped: the printf "
                             f"buffer holds {self._printf_limit.value:,} bytes per launch, as a GPU's does; "
                             f"print less, or raise it with pycuda.driver.Context.set_limit("
                             f"pycuda.driver.limit.PRINTF_FIFO_SIZE, nbytes))\n")


class GlobalPointer(int):
    """The device address of a module global: ``int(ptr)`` works, so memcpy_htod/dtoh accept it."""

    def __new__(cls, address, size):
        obj = super().__new__(cls, address)
        obj.size = size
        return obj

    def __repr__(self):
        return f"<module global 0x{int(self):x}, {self.size} bytes>"


def _symbol_name(address):
    info = _DlInfo()
    if _dladdr(address, ctypes.byref(info)) and info.dli_sname and info.dli_saddr == address:
        return info.dli_sname.decode()
    return None


_symbol_sizes = {}


def _symbol_size(path, name):
    """st_size of a dynamic symbol, read from the ELF file (ctypes cannot tell sizes)."""
    if path not in _symbol_sizes:
        _symbol_sizes[path] = _read_elf_dynsym_sizes(path)
    sizes = _symbol_sizes[path]
    if name not in sizes:
        raise LogicError(f"cuModuleGetGlobal failed: cannot tell the size of '{name}'")
    return sizes[name]


def _read_elf_dynsym_sizes(path):
    return {name: size for name, (size, _) in read_dynamic_symbols(path).items()}


def read_dynamic_symbols(path, writable=False):
    """{name: (st_size, is_defined_object)} of an ELF shared library's dynamic symbols ({} if not ELF64);
    ``writable=True``: is_defined_object only for objects a loaded library lets the process write (in a writable
    section, and not in the part the loader makes read-only once it has relocated it: PT_GNU_RELRO, where
    typeinfo and other constants that hold addresses are)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return {}
    end = "<" if data[5] == 1 else ">"
    phoff, shoff = struct.unpack_from(end + "QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from(end + "HHHH", data, 0x36)
    sections = [struct.unpack_from(end + "IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    relro = []
    for i in range(phnum):
        p_type, _, _, p_vaddr, _, _, p_memsz, _ = struct.unpack_from(end + "IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == 0x6474E552:   # PT_GNU_RELRO
            relro.append((p_vaddr, p_vaddr + p_memsz))
    symbols = {}
    for sec in sections:
        if sec[1] != 11:  # SHT_DYNSYM
            continue
        str_off = sections[sec[6]][4]
        for k in range(sec[5] // 24):
            st_name, st_info, _, st_shndx, st_value, st_size = struct.unpack_from(end + "IBBHQQ", data,
                                                                                 sec[4] + 24 * k)
            stop = data.index(b"\0", str_off + st_name)
            is_object = st_info & 0xF == 1 and st_shndx != 0   # STT_OBJECT, defined in this file
            if writable and is_object:
                in_section = st_shndx < len(sections) and sections[st_shndx][2] & 1   # SHF_WRITE
                is_object = bool(in_section) and not any(lo <= st_value < hi for lo, hi in relro)
            symbols[data[str_off + st_name:stop].decode()] = (st_size, is_object)
    return symbols


# ---- launching -------------------------------------------------------------------------------

def _dims(value, what, limits):
    if isinstance(value, (int, np.integer)):
        value = (value,)
    try:
        entries = tuple(value)
    except TypeError:
        raise TypeError(f"{what} must be a tuple of 1 to 3 positive ints, like (256, 1, 1); got {value!r}") from None
    for v in entries:
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            hint = " (n / 256 is a float in Python 3: use (n + 255) // 256)" if isinstance(v, float) else ""
            raise TypeError(f"{what} entries must be ints, got {v!r} in {value!r}{hint}")
    dims = tuple(int(v) for v in entries)
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"{what} must have 1 to 3 entries, got {len(dims)}: {value!r}")
    dims = dims + (1,) * (3 - len(dims))
    for axis, (d, lim) in enumerate(zip(dims, limits)):
        if d <= 0:
            raise LogicError(f"cuLaunchKernel failed: invalid argument: {what} {dims} has a non-positive "
                             f"entry; every dimension must be at least 1")
        if d > lim:
            raise LogicError(f"cuLaunchKernel failed: invalid argument: {what} {dims}: dimension "
                             f"{'xyz'[axis]} is {d}, the device allows at most {lim}")
    return dims


class Function:
    """A kernel of a module; call it like ``pycuda.driver.Function``."""

    def __init__(self, module, name, info_address, info):
        self.module = module
        self.name = name
        self._info_address = info_address
        self._plain_name = info.name.decode()
        self._nparams = info.nparams
        self._sizes = [info.sizes[i] for i in range(info.nparams)]
        self._aligns = [info.aligns[i] for i in range(info.nparams)]
        self._kinds = [info.kinds[i] for i in range(info.nparams)]
        codes = [info.pointees[i] for i in range(info.nparams)]
        self._pointees = [code & 0xFFFF for code in codes]
        self.needs_fibers = bool(info.needs_fibers)
        #: the kernel's __cluster_dims__(x, y, z) (blocks), or None: its grid runs as clusters of these blocks
        self.cluster_dims = tuple(int(d) for d in info.cluster) if any(info.cluster) else None
        offsets, off = [], 0
        for size, align in zip(self._sizes, self._aligns):
            off = (off + align - 1) // align * align
            offsets.append(off)
            off += size
        self._offsets = offsets
        self._arg_bytes = off
        self._pointer_offsets = [o for o, kind in zip(offsets, self._kinds) if kind == KIND_POINTER]
        self._pointer_numbers = {o: i for i, o in enumerate(offsets) if self._kinds[i] == KIND_POINTER}
        # the alignment each pointer argument's address must keep (a float4* 16 bytes), where it is more than 1
        self._pointer_aligns = [(o, codes[i] >> 16) for i, o in enumerate(offsets)
                                if self._kinds[i] == KIND_POINTER and codes[i] >> 16 > 1]
        self._max_dynamic_shared = _device.MAX_SHARED_MEMORY_PER_BLOCK
        self._prepared = None
        self._shapes = {}
        self.num_regs = 32
        self.local_size_bytes = 0
        self.const_size_bytes = 0
        self.max_threads_per_block = _device.MAX_THREADS_PER_BLOCK

    def __repr__(self):
        return f"<Function {self.name!r} ({self._nparams} parameters)>"

    @property
    def shared_size_bytes(self):
        """Static __shared__ bytes of this kernel (known once it has run: declarations register on first use)."""
        return int(self.module._lib.gpuedu_static_shared(ctypes.c_void_p(self._info_address)))

    @property
    def registers_requested(self):
        """The largest register count per thread a setmaxnreg of this kernel asked for (.inc or .dec; 0: none ran),
        for an occupancy that follows Hopper's warpgroups as they move registers; known once it has run, as
        shared_size_bytes is. (The emulator's own: PyCUDA's Function has none.)"""
        return int(self.module._lib.gpuedu_registers_requested(ctypes.c_void_p(self._info_address)))

    @property
    def registers_by_warpgroup(self):
        """The largest register count each warpgroup of a block (128 threads: 0, 1, ...) asked for with setmaxnreg
        (0: none), up to the last that asked; empty when none did. (The emulator's own, as registers_requested.)"""
        return registers_by_warpgroup(self.module._lib, self._info_address)

    # -- attributes
    _ATTRIBUTES = {
        "MAX_THREADS_PER_BLOCK": lambda f: f.max_threads_per_block,
        "SHARED_SIZE_BYTES": lambda f: f.shared_size_bytes,
        "CONST_SIZE_BYTES": lambda f: f.const_size_bytes,
        "LOCAL_SIZE_BYTES": lambda f: f.local_size_bytes,
        "NUM_REGS": lambda f: f.num_regs,
        "PTX_VERSION": lambda f: 80,
        "BINARY_VERSION": lambda f: 80,
        "CACHE_MODE_CA": lambda f: 0,
        "MAX_DYNAMIC_SHARED_SIZE_BYTES": lambda f: f._max_dynamic_shared,
        "PREFERRED_SHARED_MEMORY_CARVEOUT": lambda f: -1,
    }

    def get_attribute(self, attr):
        name = _attribute_name(attr)
        if name not in self._ATTRIBUTES:
            raise LogicError(f"cuFuncGetAttribute failed: unknown function attribute {attr!r}")
        return self._ATTRIBUTES[name](self)

    def set_attribute(self, attr, value):
        name = _attribute_name(attr)
        if name == "MAX_DYNAMIC_SHARED_SIZE_BYTES":
            value = int(value)
            if not 0 <= value <= _device.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
                raise LogicError(f"cuFuncSetAttribute failed: invalid argument: {value} bytes of dynamic shared "
                                 f"memory; the device allows at most {_device.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN}")
            self._max_dynamic_shared = value
            self._shapes.clear()
        elif name == "PREFERRED_SHARED_MEMORY_CARVEOUT":
            pass  # a hint about the L1/shared split: nothing to do on the CPU
        else:
            raise LogicError(f"cuFuncSetAttribute failed: attribute {attr!r} cannot be set")

    def set_block_shape(self, *args):
        raise LogicError("set_block_shape is gone from PyCUDA; pass block=(x, y, z) to the call")

    # -- arguments
    def _pack(self, args):
        """Pack arguments into CUDA's parameter buffer; returns (bytes, handlers)."""
        if len(args) != self._nparams:
            raise LogicError(f"kernel '{self.name}' takes {self._nparams} argument"
                             f"{'s' if self._nparams != 1 else ''}, got {len(args)}")
        buf = bytearray(self._arg_bytes)
        handlers = []
        for i, arg in enumerate(args):
            size, kind, off = self._sizes[i], self._kinds[i], self._offsets[i]
            if isinstance(arg, ArgumentHandler):
                self._check_pointee(i, arg.array.dtype, f"{type(arg).__name__} of a {arg.array.dtype} array")
                handlers.append(arg)
                value = arg.get_device_alloc()
                data = None
            elif isinstance(arg, GlobalPointer):
                value, data = int(arg), None
            elif (pointer := device_pointer(arg)) is not None:
                if isinstance(getattr(arg, "dtype", None), np.dtype):
                    self._check_pointee(i, arg.dtype, f"a {arg.dtype} {type(arg).__name__}")
                value, data = pointer, None
            elif isinstance(arg, np.generic) or (isinstance(arg, np.ndarray) and arg.ndim == 0):
                # a value; a 0-d array too (vec.make_float3(...) is one), passed by its bytes as PyCUDA does
                arg = arg[()] if isinstance(arg, np.ndarray) else arg
                data = arg.tobytes()
                value = None
            elif isinstance(arg, (bool, int, float)):
                hint = "np.float32(x)" if isinstance(arg, float) else "np.int32(n)"
                raise TypeError(f"invalid type on parameter #{i} (0-based): kernel '{self.name}' got a Python "
                                f"{type(arg).__name__} ({arg!r}); pass a NumPy scalar of the parameter's type, "
                                f"e.g. {hint}")
            elif isinstance(arg, np.ndarray):
                raise TypeError(f"invalid type on parameter #{i} (0-based): kernel '{self.name}' got a NumPy "
                                f"array, which lives in host memory; wrap it as drv.In(a), drv.Out(a) or "
                                f"drv.InOut(a), or copy it to the device first (gpuarray.to_gpu(a))")
            else:
                raise TypeError(f"invalid type on parameter #{i} (0-based): kernel '{self.name}' got "
                                f"{type(arg).__name__}; pass device memory (mem_alloc, GPUArray), In/Out/InOut, "
                                f"or a NumPy scalar")
            if data is None:
                if kind != KIND_POINTER:
                    raise TypeError(f"invalid type on parameter #{i} (0-based): kernel '{self.name}' expects a "
                                    f"{size}-byte {_KIND_NAMES[kind]} there, got device memory")
                struct.pack_into("P", buf, off, value)
                continue
            if len(data) != size:
                raise TypeError(f"invalid type on parameter #{i} (0-based): kernel '{self.name}' expects a "
                                f"{size}-byte {_KIND_NAMES[kind]} there, got {arg.dtype} ({len(data)} bytes); "
                                f"use e.g. {_suggest(kind, size)}")
            dkind = arg.dtype.kind
            ok = (kind == KIND_INTEGER and dkind in "iub") or (kind == KIND_FLOAT and dkind == "f") or \
                 (kind == KIND_POINTER and dkind in "iu") or kind == KIND_STRUCT
            if not ok:
                raise TypeError(f"invalid type on parameter #{i} (0-based): kernel '{self.name}' expects a "
                                f"{size}-byte {_KIND_NAMES[kind]} there, got {arg.dtype}; use e.g. "
                                f"{_suggest(kind, size)}")
            buf[off:off + size] = data
        return bytes(buf), handlers

    def _check_pointee(self, i, dtype, given):
        """Refuse an array whose elements are not the size of what pointer parameter ``i`` points to (a float64
        array for a ``float*``): the kernel would read each element's bytes as halves of two. Elements of the right
        size but another kind (float32 for an ``int*``) pass, as reading a float's bits as an int is done on
        purpose; ``void*``, ``char*`` and structs take anything."""
        code = self._pointees[i]
        if not code or dtype.kind not in "fciub":
            return
        size = code & 0xFF
        element = dtype.itemsize // 2 if dtype.kind == "c" and code >> 8 == 1 else dtype.itemsize
        if size == 1 or element == size:
            return
        floating = code >> 8 == 1
        wanted = {2: "float16", 4: "float32", 8: "float64"}.get(size) if floating else f"int{8 * size}"
        raise TypeError(f"invalid type on parameter #{i} (0-based): kernel '{self.name}' takes a pointer to "
                        f"{size}-byte {'floating-point numbers' if floating else 'integers'} there, got {given}, "
                        f"whose elements are {dtype.itemsize} bytes: the kernel would read them as something else; "
                        f"convert the array first" + (f", e.g. a.astype(np.{wanted})" if wanted else ""))

    def _check_device_pointers(self, module, argbuf):
        """Every pointer argument must point at device memory (or be NULL): a host address (a NumPy array's
        ``ctypes.data``) is an illegal address on a GPU, and here it would let the kernel change host memory.
        And it must keep the alignment of the type it points to: a float4* at an address that is not a multiple
        of 16 faults on a GPU with a misaligned address, at the first access through it."""
        for offset in self._pointer_offsets:     # what it points at first: a bad pointer is seldom aligned
            address = _POINTER.unpack_from(argbuf, offset)[0]
            if address and not _memory.holds(address) and not module._lib.gpuedu_heap_holds(ctypes.c_void_p(address)):
                why = _memory.describe_invalid(address)
                if why:
                    raise LaunchError(f"kernel '{self.name}': parameter #{self._pointer_numbers[offset]} (0-based) "
                                      f"is not device memory: {why}. On a GPU the kernel would fault with an "
                                      f"illegal address")
                raise LaunchError(
                    f"kernel '{self.name}': parameter #{self._pointer_numbers[offset]} (0-based) is 0x{address:x}, "
                    f"which is not device memory: on a GPU the kernel would fault with an illegal address. A host "
                    f"address (a NumPy array's .ctypes.data, say) cannot be given to a kernel: copy the array "
                    f"(gpuarray.to_gpu(a), or drv.In(a)/drv.Out(a)), or use mapped host memory "
                    f"(pagelocked_empty(..., mem_flags=host_alloc_flags.DEVICEMAP).base.get_device_pointer())")
        for offset, align in self._pointer_aligns:
            address = _POINTER.unpack_from(argbuf, offset)[0]
            if address % align:
                raise LaunchError(
                    f"kernel '{self.name}': parameter #{self._pointer_numbers[offset]} (0-based) is 0x{address:x}, "
                    f"which is not a multiple of {align}, the alignment of the type it points to: on a GPU the kernel "
                    f"would fault with a misaligned address. Device allocations are aligned; an offset added on the "
                    f"host (int(a.gpudata) + k) must be a multiple of {align} bytes too. Misaligned accesses the "
                    f"kernel makes itself (a cast to float4* of p + 1) show under gpuedu.memcheck()")

    # -- launching
    def _check_launch(self, block, grid, shared):
        # A launch shape seen before was valid then: reuse its packed form (cheap launches in loops).
        try:
            return self._shapes[(block, grid, shared)]
        except (KeyError, TypeError):
            pass
        dims = self._check_new_launch(block, grid, shared)
        try:
            if len(self._shapes) < 64:
                self._shapes[(block, grid, shared)] = dims
        except TypeError:  # unhashable (a list): fine, just not remembered
            pass
        return dims

    def _check_new_launch(self, block, grid, shared):
        block = _dims(block, "block", _device.MAX_BLOCK_DIM)
        grid = _dims(grid, "grid", _device.MAX_GRID_DIM)
        threads = block[0] * block[1] * block[2]
        if threads > _device.MAX_THREADS_PER_BLOCK:
            raise LogicError(f"cuLaunchKernel failed: invalid argument: block {block} has {threads} threads; "
                             f"the device allows at most {_device.MAX_THREADS_PER_BLOCK} per block")
        shared = int(shared or 0)
        if shared < 0:
            raise LogicError(f"cuLaunchKernel failed: invalid argument: shared={shared} is negative")
        if shared > self._max_dynamic_shared:
            raise LogicError(
                f"cuLaunchKernel failed: invalid argument: {shared} bytes of dynamic shared memory; the limit "
                f"for this kernel is {self._max_dynamic_shared} bytes (48 KiB unless raised with "
                f"set_attribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, ...), up to "
                f"{_device.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN})")
        # Static + dynamic shared memory per block: 48 KiB, or what set_attribute allowed.
        limit = max(_device.MAX_SHARED_MEMORY_PER_BLOCK, self._max_dynamic_shared)
        cluster = self.cluster_dims or (0, 0, 0)
        if self.cluster_dims:
            self._check_cluster(grid)
        return struct.pack("11I", *grid, *block, shared, limit, *cluster)

    def _check_cluster(self, grid):
        """A kernel declared with __cluster_dims__ runs its grid as clusters of that shape: each of the grid's
        dimensions must be a multiple of the cluster's, and a cluster holds at most 8 blocks (the portable limit),
        as cuLaunchKernel checks."""
        dims = self.cluster_dims
        size = dims[0] * dims[1] * dims[2]
        if size > MAX_CLUSTER_BLOCKS:
            raise LogicError(f"cuLaunchKernel failed: cluster misconfiguration: kernel '{self.name}' declares "
                             f"__cluster_dims__{dims}, {size} blocks a cluster; at most {MAX_CLUSTER_BLOCKS} (the "
                             f"portable cluster size)")
        for axis, g, d in zip("xyz", grid, dims):
            if g % d:
                raise LogicError(f"cuLaunchKernel failed: cluster misconfiguration: kernel '{self.name}' declares "
                                 f"__cluster_dims__{dims}, and the grid's {axis} ({g}) is not a multiple of the "
                                 f"cluster's ({d}): make the grid {tuple(-(-a // b) * b for a, b in zip(grid, dims))} "
                                 f"and guard the extra blocks")

    def _run(self, dims, argbuf, stream=None):
        if _activity._recorder[0] is not None:   # gpuedu.trace() lays the launch out on its stream
            with _activity.call("kernel", name=self.name, stream=_activity.stream_id(stream), dims=dims):
                self._dispatch(dims, argbuf)
        else:
            self._dispatch(dims, argbuf)

    def _dispatch(self, dims, argbuf):
        observer = _observer[0]
        if observer is not None:
            observer(self, dims, argbuf)
        else:
            self._run_on(self.module, self._info_address, dims, argbuf)

    def _run_on(self, module, info_address, dims, argbuf, watch=True, one_worker=False):
        """Run the grid with ``module``'s code: this kernel's own module, or its profiled twin.

        Afterwards the watched bytes around each allocation passed as an argument must be intact (a write
        into the slack past the end, or just before the start, faults nowhere); ``watch=False`` (memcheck,
        which reports those writes itself) only puts them back. ``one_worker=True`` runs the blocks on one
        worker, in the grid's order, whatever ``set_threads`` says (racecheck)."""
        self._check_device_pointers(module, argbuf)
        timeout = _settings["timeout"]
        timer = None
        if timeout:
            timer = threading.Timer(timeout, module._lib.gpuedu_request_stop, (TIMEOUT,))
            timer.daemon = True
            timer.start()
        try:
            # One launch at a time in the process: launches share the signal handlers, and a
            # module's runtime state (the emulated device runs one grid at a time anyway).
            with _launch_lock:
                workers = 1 if module.single_worker or one_worker or self.cluster_dims else _settings["threads"]
                code = module._lib.gpuedu_launch(info_address, dims, _settings["schedule"], _settings["seed"],
                                                  _force_fibers, argbuf, workers)
        finally:
            if timer is not None:
                timer.cancel()
        if module._printf_len.value or module._printf_dropped.value:
            module._take_output()
        if code:
            self._raise(code, dims, timeout, module._error, module)
        for offset in self._pointer_offsets:
            written = _memory.watched_writes(_POINTER.unpack_from(argbuf, offset)[0])
            if written is not None and watch:
                self._raise_watched(offset, *written)

    def _raise_watched(self, offset, alloc, first, last):
        number = self._offsets.index(offset)
        span = f"byte {first}" if first == last else f"bytes {first} to {last}"
        if first < 0:
            what = f"wrote just before the start of a {alloc.size}-byte allocation ({span}; a negative index?)"
        else:
            what = (f"wrote past the end of a {alloc.size}-byte allocation ({span}, right after its end); add a "
                    f"bounds guard such as `if (i < n)`")
        raise LaunchError(f"kernel '{self.name}' {what}. Found after the launch in the allocation given as "
                          f"parameter #{number} (0-based), whose spare bytes the emulator watches; a GPU "
                          f"reports it under compute-sanitizer. gpuedu.memcheck() names the thread and the line")

    def _raise(self, code, dims, timeout, e, module=None):
        kernel = f"kernel '{self.name}'"
        running = (module._lib.gpuedu_running_kernel() or b"").decode() if module is not None else ""
        if running and running != self._plain_name:   # a grid it launched from device code failed
            kernel = f"kernel '{running}' (a grid that kernel '{self.name}' launched from device code)"
        block = "({},{},{})".format(*e.block)
        thread = "({},{},{})".format(*e.thread)
        where = f"{kernel} thread {thread} of block {block}"
        message = e.message.decode("utf-8", "replace")
        if code == FAULT or (code in (STACK_OVERFLOW, STACK_SMASHED) and (
                _memory.find(e.fault_address) or _shared_place(module, e.fault_address) is not None)):
            # (a fault near the launch's stack that lies in a device allocation or in shared memory is theirs)
            raise LaunchError(_describe_fault(where, e.fault_address, e.fault_is_write, module))
        if code == DIVIDE_BY_ZERO:
            raise LaunchError(f"{where} divided an integer by zero (or INT_MIN by -1); a GPU gives an unspecified "
                              f"value there instead of stopping, so guard the divisor")
        if code == STACK_OVERFLOW:
            limit = ("128 KiB per thread" if self.needs_fibers or _force_fibers
                     else "8 MiB for a launch whose threads run one after another")
            raise LaunchError(f"{where} overflowed its stack ({limit} in the emulator): large local "
                              f"arrays or deep recursion; move big arrays to shared or global memory")
        if code in (STACK_SMASHED, DEVICE_MISUSE):
            raise LaunchError(f"{where} {message}")
        if code == INTERRUPT:
            raise KeyboardInterrupt(f"{kernel} interrupted in block {block}")
        if code == TIMEOUT:
            raise LaunchError(f"{kernel} ran longer than the kernel timeout ({timeout:g} s, "
                              f"GPUEDU_KERNEL_TIMEOUT or set_kernel_timeout) and was "
                              f"stopped in block {block} (an endless loop? check the loop conditions)")
        if code == ASSERT:
            raise LaunchError(f"device-side assert triggered: {where}: {message}")
        if code == SIGNALLED:
            raise LaunchError(f"{where} {message}")
        if code == TOO_MUCH_SHARED:
            raise LaunchError(f"cuLaunchKernel failed: {kernel}: {message}")
        if code in (BARRIER_PARTIAL, WARP_EXITED, WARP_MISMATCH, DEADLOCK):
            raise LaunchError(f"{kernel} block {block}: {message}")
        if code in (DYNAMIC_SHARED_OVERRUN, STATIC_SHARED_OVERRUN):
            raise LaunchError(f"{kernel} block {block} {message}")
        if code == LOOP_BARRIER:
            raise LaunchError(f"{where} {message}")
        raise LaunchError(f"{where}: launch failed with code {code}: {message}")

    def __call__(self, *args, block=None, grid=(1, 1), shared=0, stream=None, time_kernel=False, texrefs=(),
                 **kwargs):
        unknown = set(kwargs) - {"shared_size"}
        if unknown:
            raise TypeError(f"unknown keyword argument(s) for a kernel launch: {', '.join(sorted(unknown))}")
        shared = kwargs.get("shared_size", shared)
        if block is None:
            raise LogicError(f"kernel '{self.name}' launched without block=(x, y, z): give the block shape")
        dims = self._check_launch(block, grid, shared)
        argbuf, handlers = self._pack(args)
        try:
            for h in handlers:
                h.pre_call(stream)
            start = time.perf_counter()
            self._run(dims, argbuf, stream)
            elapsed = time.perf_counter() - start
            for h in handlers:
                h.post_call(stream)
        finally:
            for h in handlers:
                h.release()
        if time_kernel:
            return elapsed
        return None

    # -- prepared launches
    def prepare(self, arg_types, block=None, shared=None, texrefs=()):
        """Fix the argument types (a struct format like "PPi", or a list of dtypes) for prepared_call."""
        if isinstance(arg_types, str):
            codes = [c for c in arg_types if not c.isspace()]
        else:
            codes = []
            for t in arg_types:
                if t is None or t in ("P", np.intp, np.uintp):
                    codes.append("P")
                elif np.dtype(t).kind == "V":           # a struct (gpuarray.vec.float3): packed as its bytes
                    codes.append(f"{np.dtype(t).itemsize}s")
                else:
                    codes.append(np.dtype(t).char)
        if len(codes) != self._nparams:
            raise LogicError(f"prepare: kernel '{self.name}' takes {self._nparams} arguments, the type string "
                             f"{arg_types!r} describes {len(codes)}")
        fmt = "="
        off = 0
        for i, c in enumerate(codes):
            size = struct.calcsize("=" + c) if c != "P" else struct.calcsize("P")
            if size != self._sizes[i]:
                raise LogicError(f"prepare: parameter #{i} of kernel '{self.name}' is {self._sizes[i]} bytes, "
                                 f"but {c!r} is {size} bytes")
            pad = self._offsets[i] - off
            fmt += "x" * pad + ("Q" if c == "P" else c)
            off = self._offsets[i] + size
        fmt += "x" * (self._arg_bytes - off)
        self._prepared = (struct.Struct(fmt), [i for i, c in enumerate(codes) if c == "P"])
        if block is not None:
            self._prepared_block = block
        return self

    def _prepared_args(self, args):
        if self._prepared is None:
            raise LogicError(f"kernel '{self.name}': call prepare(arg_types) before prepared_call")
        packer, pointer_slots = self._prepared
        args = [a.tobytes() if isinstance(a, (np.void, np.ndarray)) and a.dtype.kind == "V" else a for a in args]
        for i in pointer_slots:
            a = args[i]
            if not isinstance(a, int):
                if not isinstance(a, np.generic) and isinstance(getattr(a, "dtype", None), np.dtype):
                    # a GPUArray (not an address such as np.uintp): the same check as a plain call's
                    self._check_pointee(i, a.dtype, f"a {a.dtype} {type(a).__name__}")
                pointer = device_pointer(a)
                args[i] = int(a) if pointer is None else pointer
        try:
            return packer.pack(*args)
        except struct.error as exc:
            raise TypeError(f"prepared_call of kernel '{self.name}': arguments do not match the prepared types: "
                            f"{exc}") from None

    def prepared_call(self, grid, block, *args, shared_size=0):
        dims = self._check_launch(block, grid, shared_size)
        self._run(dims, self._prepared_args(args))

    def prepared_timed_call(self, grid, block, *args, shared_size=0):
        dims = self._check_launch(block, grid, shared_size)
        argbuf = self._prepared_args(args)
        start = time.perf_counter()
        self._run(dims, argbuf)
        elapsed = time.perf_counter() - start
        return lambda: elapsed

    def prepared_async_call(self, grid, block, stream, *args, shared_size=0):
        # Launches run synchronously in the emulator: the stream is already done afterwards.
        dims = self._check_launch(block, grid, shared_size)
        self._run(dims, self._prepared_args(args), stream)


_ATTRIBUTE_ORDER = ["MAX_THREADS_PER_BLOCK", "SHARED_SIZE_BYTES", "CONST_SIZE_BYTES", "LOCAL_SIZE_BYTES",
                    "NUM_REGS", "PTX_VERSION", "BINARY_VERSION", "CACHE_MODE_CA", "MAX_DYNAMIC_SHARED_SIZE_BYTES",
                    "PREFERRED_SHARED_MEMORY_CARVEOUT"]


def _attribute_name(attr):
    """CUDA's function attribute name for an enum member, a name, or CUDA's number."""
    name = getattr(attr, "name", None)
    if name is None:
        if isinstance(attr, (int, np.integer)) and 0 <= int(attr) < len(_ATTRIBUTE_ORDER):
            return _ATTRIBUTE_ORDER[int(attr)]
        name = str(attr)
    return name.rsplit(".", 1)[-1].upper()


def module_from_file(filename):
    """Load a module the emulator compiled (a shared library, e.g. written from ``compiler.compile``)."""
    if not os.path.isfile(filename):
        raise LogicError(f"cuModuleLoad failed: file not found: {filename}")
    return Module(os.path.abspath(filename))


def module_from_buffer(buffer, options=None, message_handler=None):
    """Load the binary ``compiler.compile`` returned (kept in the kernel cache under its hash)."""
    import hashlib
    data = bytes(buffer)
    if data[:4] != b"\x7fELF" and data[:4] != b"\xcf\xfa\xed\xfe":
        raise LogicError("cuModuleLoadData failed: the buffer is not a module the CPU emulator compiled "
                         "(PTX and cubin need a real GPU); build it with pycuda.compiler.compile or SourceModule")
    digest = hashlib.sha256(data).hexdigest()
    path = os.path.join(cache_dir(), "b" + digest[:40] + ".so")
    # Its name is its checksum: what is there is loaded only if it is these bytes (a file cut short by a full
    # disk would crash the process that loads it); anything else is said, and written again.
    if not _cache.verified(path, len(data), digest, "module written from a buffer"):
        _cache.write_atomically(path, data)
    return Module(path)


def _suggest(kind, size):
    if kind == KIND_FLOAT:
        return {2: "np.float16(x)", 4: "np.float32(x)", 8: "np.float64(x)"}.get(size, "a matching NumPy scalar")
    if kind == KIND_INTEGER:
        return {1: "np.int8(n)", 2: "np.int16(n)", 4: "np.int32(n)", 8: "np.int64(n)"}.get(size, "np.int32(n)")
    if kind == KIND_POINTER:
        return "a device allocation (drv.mem_alloc, gpuarray) or drv.In/Out/InOut(array)"
    return f"a NumPy structured scalar (np.void) of {size} bytes"


def _shared_place(module, address):
    """Where ``address`` lies in the shared memory of ``module``'s worker threads, past what a block may touch:
    ``("static", bytes past the end of the last __shared__ variable before it, that variable's size, its name,
    whether it is the running kernel's, whether it is an array)`` (the running kernel's last, if it has one there; the size 0 and the bytes
    from the arena's start when no variable starts before it), ``("dynamic", bytes past the end of the launch's
    dynamic shared memory, shared=)``, or None."""
    if module is None or not address:
        return None
    out = (ctypes.c_ulonglong * 3)()
    name = ctypes.c_char_p()
    area = module._lib.gpuedu_shared_place(ctypes.c_void_p(address), out, ctypes.byref(name))
    if area == 1:
        return ("static", out[0], out[1], name.value.decode() if name.value else None, bool(out[2] & 1),
                bool(out[2] & 2))
    if area == 2:
        return "dynamic", out[0], out[1]
    return None


def _describe_shared_fault(where, verb, place):
    if place[0] == "dynamic":
        _, past, shared = place
        at = "right after its end" if past == 0 else f"{past} bytes past its end"
        return (f"{where} {verb} past the dynamic shared memory the launch asked for (shared={shared} bytes): at "
                f"byte {shared + past} of it, {at}, which faults on a GPU too; pass a larger shared= (in bytes, "
                f"not elements) or check the index. gpuedu.memcheck() names the line")
    _, past, size, name, own, array = place
    if size:
        kind = "array" if array else "variable"
        variable = f"the __shared__ {kind} '{name}' ({size} bytes)" if name else f"a {size}-byte __shared__ variable"
        whose = "the kernel's" if own else "the module's"
        at = f"{past} bytes past the end of {variable}, {whose} last before that address"
    else:
        at = f"{past} bytes into the static shared memory, where the module has no __shared__ variable"
    return (f"{where} {verb} past the block's static __shared__ memory: {at}. An index far out of range faults "
            f"on a GPU too; check each index against the array's size. gpuedu.memcheck() names the line")


def _describe_fault(where, address, is_write, module=None):
    if is_write == _NO_ADDRESS:
        return (f"{where} made an access the CPU refused without naming an address: most likely a vector type "
                f"(float4, int4, double2) read or written at an address that is not a multiple of its size, "
                f"which faults on a GPU too (misaligned address); or a pointer made of garbage. Check the "
                f"pointer casts; gpuedu.memcheck() names the access")
    verb = {1: "wrote", 0: "read"}.get(is_write, "accessed")
    found = _memory.find(address)
    if found is None and (place := _shared_place(module, address)) is not None:
        return _describe_shared_fault(where, verb, place)
    if found is None:
        if address < _memory.FIRST_PAGES:
            return (f"{where} {verb} address 0x{address:x}: a null (or nearly null) pointer; was an argument "
                    f"left unset, or a pointer never allocated?")
        if (why := _memory.describe_invalid(address)) is not None:
            return f"{where} {verb} an address that is not device memory: {why}"
        return (f"{where} {verb} address 0x{address:x}, which is in no device allocation (a host pointer, a "
                f"freed buffer, or an index far out of range)")
    alloc, offset = found
    if offset >= alloc.size:
        past = offset - alloc.size
        return (f"{where} {verb} past the end of a {alloc.size}-byte allocation (at byte offset {offset}, "
                f"{past} bytes past its end); add a bounds guard such as `if (i < n)`")
    return (f"{where} {verb} {-offset} bytes before the start of a {alloc.size}-byte allocation (a negative "
            f"index?); check the index arithmetic")


def registers_by_warpgroup(lib, info_address):
    """What ``Function.registers_by_warpgroup`` says, for kernel ``info_address`` of a module's library ``lib``."""
    groups = (ctypes.c_uint * 8)()
    lib.gpuedu_registers_by_warpgroup(ctypes.c_void_p(info_address), groups, 8)
    counts = list(groups)
    while counts and not counts[-1]:
        counts.pop()
    return tuple(counts)
