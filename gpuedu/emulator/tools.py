"""``pycuda.tools`` on the CPU: device data, dtype names, default contexts, memory pools."""
import functools
import re
import weakref

import numpy as np

from . import driver as drv

# --------------------------------------------------------------------------- contexts


def make_default_context(ctx_maker=None):
    """Create a context on the first device that accepts one (there is one device here)."""
    if ctx_maker is None:
        def ctx_maker(dev):
            return dev.make_context()
    errors = []
    for ordinal in range(drv.Device.count()):
        try:
            return ctx_maker(drv.Device(ordinal))
        except drv.Error as exc:
            errors.append(f"device {ordinal}: {exc}")
    raise RuntimeError("make_default_context() could not create a context: " + "; ".join(errors))


_context_caches = []


def context_dependent_memoize(func):
    """Memoise ``func`` per current context, as PyCUDA does for its generated kernels."""
    cache = {}
    _context_caches.append(cache)

    @functools.wraps(func)
    def wrapper(*args):
        ctx = drv.Context.get_current()
        key = (id(ctx), args)
        try:
            return cache[key]
        except KeyError:
            result = cache[key] = func(*args)
            return result
        except TypeError:  # unhashable arguments: compute without caching
            return func(*args)

    wrapper.clear_cache = cache.clear
    return wrapper


def clear_context_caches():
    """Forget everything ``context_dependent_memoize`` remembered (e.g. at context teardown)."""
    for cache in _context_caches:
        cache.clear()


# --------------------------------------------------------------------------- test helpers

def _test_context():
    drv.init()
    ctx = make_default_context()
    dev = ctx.get_device()
    assert isinstance(dev.name(), str)
    assert isinstance(dev.compute_capability(), tuple)
    assert isinstance(dev.get_attributes(), dict)
    return ctx


def _end_test_context(ctx):
    import gc
    ctx.pop()
    clear_context_caches()
    gc.collect()


def mark_cuda_test(inner_f):
    """Run a test function in a fresh context of its own, popped (and caches cleared) afterwards.

    PyCUDA's decorator for its own tests; marked ``pytest.mark.cuda`` where pytest is installed.
    """
    @functools.wraps(inner_f)
    def f(*args, **kwargs):
        ctx = _test_context()
        try:
            return inner_f(*args, **kwargs)
        finally:
            _end_test_context(ctx)

    try:
        import pytest
    except ImportError:
        return f
    return pytest.mark.cuda(f)


def init_cuda_context_fixture():
    """The body of a pytest fixture that gives each test a fresh context: ``yield from`` it."""
    ctx = _test_context()
    try:
        yield
    finally:
        _end_test_context(ctx)


# --------------------------------------------------------------------------- device data

class DeviceData:
    """Numbers about a device that kernel generators use to choose block sizes."""

    def __init__(self, dev=None):
        if dev is None:
            dev = drv.Context.get_device()
        self.max_threads = dev.get_attribute(drv.device_attribute.MAX_THREADS_PER_BLOCK)
        self.warp_size = dev.get_attribute(drv.device_attribute.WARP_SIZE)
        self.thread_blocks_per_mp = 16
        self.warps_per_mp = self.max_threads // self.warp_size
        self.registers = dev.get_attribute(drv.device_attribute.MAX_REGISTERS_PER_BLOCK)
        self.shared_memory = dev.get_attribute(drv.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK)
        self.smem_alloc_granularity = 128
        self.smem_granularity = 32        # shared-memory banks
        self.register_allocation_unit = "warp"

    def align(self, bytes, word_size=4):
        return _round_up(bytes, self.align_bytes(word_size))

    def align_dtype(self, elements, dtype_size):
        return _round_up(elements, self.align_words(dtype_size))

    def align_words(self, word_size):
        return self.align_bytes(word_size) // word_size

    def align_bytes(self, word_size=4):
        # a warp's 32 accesses of word_size bytes, the span a coalesced access covers
        if word_size not in (4, 8, 16):
            raise ValueError(f"no alignment rule for word size {word_size}")
        return self.warp_size * word_size

    @staticmethod
    def make_valid_tex_channel_count(size):
        for count in (1, 2, 4):
            if count >= size:
                return count
        raise ValueError(f"no valid texture channel count for {size}")


class OccupancyRecord:
    """How many blocks of ``threads`` threads fit on one multiprocessor, and what limits it.

    ``tb_per_mp`` blocks, ``warps_per_mp`` warps, ``occupancy`` = active warps / the most
    warps a multiprocessor holds, and ``limited_by`` one of "device", "warps", "regs", "smem".
    """

    def __init__(self, devdata, threads, shared_mem=0, registers=0):
        if threads > devdata.max_threads:
            raise ValueError(f"{threads} threads are more than a block may have ({devdata.max_threads})")
        warps = -(-threads // devdata.warp_size)   # a partial warp still takes a whole warp
        limits = [(devdata.thread_blocks_per_mp, "device"), (devdata.warps_per_mp // warps, "warps")]
        if registers:
            limits.append((devdata.registers // (registers * warps * devdata.warp_size), "regs"))
        if shared_mem:
            limits.append((devdata.shared_memory // _round_up(shared_mem, devdata.smem_alloc_granularity),
                           "smem"))
        self.tb_per_mp, self.limited_by = min(limits, key=lambda limit: limit[0])
        self.warps_per_mp = self.tb_per_mp * warps
        self.occupancy = self.warps_per_mp / devdata.warps_per_mp


def _round_up(n, m):
    return (n + m - 1) // m * m


# --------------------------------------------------------------------------- dtypes

_dtype_to_ctype = {}
_ctype_to_dtype = {}


def register_dtype(dtype, c_names, alias_ok=False):
    """PyCUDA's older spelling of ``get_or_register_dtype(c_names, dtype)`` (deprecated there too)."""
    import warnings
    warnings.warn("register_dtype is deprecated. Use get_or_register_dtype instead.", DeprecationWarning,
                  stacklevel=2)
    if not alias_ok:
        names = [c_names] if isinstance(c_names, str) else list(c_names)
        known = _dtype_to_ctype.get(np.dtype(dtype))
        if known is not None and known not in names:
            raise RuntimeError(f"dtype {np.dtype(dtype)} is already registered as {known!r}; "
                               "pass alias_ok=True to give it another name")
    get_or_register_dtype(c_names, dtype)


def get_or_register_dtype(c_names, dtype=None):
    """Name a dtype in C (``get_or_register_dtype("float4", np.dtype(...))``), or look one up."""
    if isinstance(c_names, str):
        c_names = [c_names]
    if dtype is None:
        for name in c_names:
            if name in _ctype_to_dtype:
                return _ctype_to_dtype[name]
        raise TypeError(f"C type {c_names[0]!r} is not registered; "
                        "register it with get_or_register_dtype(name, dtype)")
    dtype = np.dtype(dtype)
    for name in c_names:
        existing = _ctype_to_dtype.get(name)
        if existing is not None and existing != dtype:
            raise RuntimeError(f"C type {name!r} is already registered as {existing}, not {dtype}")
        _ctype_to_dtype[name] = dtype
    _dtype_to_ctype.setdefault(dtype, c_names[0])
    return dtype


for _names, _dtype in [
    (["float"], np.float32), (["double"], np.float64),
    (["signed char", "char"], np.int8), (["unsigned char"], np.uint8),
    (["short", "signed short", "short int"], np.int16), (["unsigned short"], np.uint16),
    (["int", "signed int", "signed"], np.int32), (["unsigned int", "unsigned"], np.uint32),
    (["long", "long int", "long long", "signed long"], np.int64),
    (["unsigned long", "unsigned long long", "size_t"], np.uint64),
    (["bool"], np.bool_), (["__half", "half"], np.float16),
    (["pycuda::complex<float>"], np.complex64), (["pycuda::complex<double>"], np.complex128),
]:
    get_or_register_dtype(_names, _dtype)
# "long long" and "size_t" share int64/uint64 with "long": keep the short names as the C spelling.
_dtype_to_ctype[np.dtype(np.int64)] = "long"
_dtype_to_ctype[np.dtype(np.uint64)] = "unsigned long"


def dtype_to_ctype(dtype, with_fp_tex_hack=False):
    """The C type name of a NumPy dtype: ``float32 -> "float"``."""
    if dtype is None:
        raise ValueError("dtype may not be None")
    dtype = np.dtype(dtype)
    if with_fp_tex_hack:
        if dtype == np.float32:
            return "fp_tex_float"
        if dtype == np.float64:
            return "fp_tex_double"
    try:
        return _dtype_to_ctype[dtype]
    except KeyError:
        raise ValueError(f"unable to map dtype '{dtype}' to a C type; "
                         "register it with get_or_register_dtype(name, dtype)") from None


# --------------------------------------------------------------------------- argument declarations
# (here, as in PyCUDA: pycuda.elementwise and pycuda.reduction import them from pycuda.tools)

class VectorArg:
    """A pointer argument: ``float *x``."""

    def __init__(self, dtype, name):
        self.dtype = np.dtype(dtype)
        self.name = name

    def declarator(self):
        return f"{dtype_to_ctype(self.dtype)} *{self.name}"

    struct_char = "P"

    def __repr__(self):
        return f"VectorArg({self.dtype}, {self.name!r})"


class ScalarArg:
    """A by-value argument: ``float a``."""

    def __init__(self, dtype, name):
        self.dtype = np.dtype(dtype)
        self.name = name

    def declarator(self):
        return f"{dtype_to_ctype(self.dtype)} {self.name}"

    @property
    def struct_char(self):
        return self.dtype.char

    def __repr__(self):
        return f"ScalarArg({self.dtype}, {self.name!r})"


_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict"}
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*$")


def parse_c_arg(c_arg):
    """``"const float *__restrict__ x"`` -> ``VectorArg(float32, "x")``; ``"int n"`` -> ScalarArg."""
    text = c_arg.strip()
    is_pointer = "*" in text
    if text.count("*") > 1:
        raise ValueError(f"cannot parse argument {c_arg!r}: pointers to pointers are not supported")
    if text.endswith("[]"):               # "float x[]" is "float *x"
        text, is_pointer = text[:-2], True
    words = [w for w in text.replace("*", " ").split() if w not in _QUALIFIERS]
    if len(words) < 2 or not _IDENTIFIER.match(words[-1]):
        raise ValueError(f"cannot parse argument {c_arg!r}: expected a C declaration such as "
                         "'float *x' or 'int n'")
    c_type, name = " ".join(words[:-1]), words[-1]
    try:
        dtype = get_or_register_dtype(c_type)
    except TypeError:
        raise ValueError(f"unknown C type {c_type!r} in argument {c_arg!r} (known: float, double, "
                         "int, unsigned int, long, char, short, ... or types registered with "
                         "pycuda.tools.get_or_register_dtype)") from None
    return VectorArg(dtype, name) if is_pointer else ScalarArg(dtype, name)


# --------------------------------------------------------------------------- memory pools

class PooledDeviceAllocation(drv.DeviceAllocation):
    """A device block on loan from a ``DeviceMemoryPool``; ``free()`` gives it back.

    It is a ``DeviceAllocation`` (as in PyCUDA), so kernels and copies accept it.
    """

    __slots__ = ("_pool", "_block", "_size")

    def __init__(self, pool, block, size):
        # Not DeviceAllocation.__init__: the memory belongs to ``block``, which the
        # pool keeps; the base class's own handle stays empty.
        self._alloc = None
        self._pool = pool
        self._block = block
        self._size = size

    def __int__(self):
        if self._block is None:
            raise drv.LogicError("this pooled allocation has been freed")
        return int(self._block)

    __index__ = __int__

    @property
    def size(self):
        return self._size

    def free(self):
        if self._block is None:
            raise drv.LogicError("this pooled allocation was already freed")
        block, self._block = self._block, None
        self._pool._give_back(block, self._size)

    def __del__(self):
        if getattr(self, "_block", None) is not None:
            try:
                self._pool._give_back(self._block, self._size)
            except Exception:  # interpreter shutdown
                pass
            self._block = None

    def __repr__(self):
        return f"<PooledDeviceAllocation {self._size} bytes>"


_MANTISSA_BITS = 2     # PyCUDA's pools round sizes to 1.xx binary: 4 bins per power of two
_MANTISSA_MASK = (1 << _MANTISSA_BITS) - 1


def bitlog2(n):
    """floor(log2(n)) for n >= 1 (0 for 0): the index of the highest set bit."""
    return max(int(n).bit_length() - 1, 0)


def _shift_left(x, n):
    return x << n if n >= 0 else x >> -n


def _bin_number(size):
    exponent = bitlog2(size)
    return exponent << _MANTISSA_BITS | (_shift_left(size, _MANTISSA_BITS - exponent) & _MANTISSA_MASK)


def _alloc_size(bin_nr):
    exponent, mantissa = bin_nr >> _MANTISSA_BITS, bin_nr & _MANTISSA_MASK
    ones = _shift_left(1, exponent - _MANTISSA_BITS)
    ones = ones - 1 if ones else 0
    return _shift_left((1 << _MANTISSA_BITS) | mantissa, exponent - _MANTISSA_BITS) | ones


class DeviceMemoryPool:
    """Keeps freed device blocks for reuse: ``pool.allocate`` is a GPUArray allocator.

    As in PyCUDA, a request is rounded up to its bin's size (``bin_number``, ``alloc_size``: four bins per
    power of two, so at most a quarter more than asked for) and an idle block of the same bin serves it.
    """

    def __init__(self):
        self._free = {}          # bin number -> list of idle DeviceAllocations of alloc_size(bin) bytes
        self.active_blocks = 0
        self.managed_bytes = 0
        self.active_bytes = 0

    @staticmethod
    def bin_number(size):
        """The bin a request of ``size`` bytes falls in."""
        return _bin_number(int(size))

    @staticmethod
    def alloc_size(bin_nr):
        """The bytes every block of bin ``bin_nr`` holds (at least any request that falls in it)."""
        return _alloc_size(int(bin_nr))

    @property
    def held_blocks(self):
        return sum(len(blocks) for blocks in self._free.values())

    def allocate(self, nbytes):
        nbytes = int(nbytes)
        bin_nr = _bin_number(nbytes)
        idle = self._free.get(bin_nr)
        if idle:
            alloc = idle.pop()
        else:
            alloc = drv.mem_alloc(_alloc_size(bin_nr))
            self.managed_bytes += _alloc_size(bin_nr)
        self.active_blocks += 1
        self.active_bytes += nbytes
        return PooledDeviceAllocation(self, alloc, nbytes)

    __call__ = allocate

    def _give_back(self, alloc, nbytes):
        self.active_blocks -= 1
        self.active_bytes -= nbytes
        self._free.setdefault(_bin_number(nbytes), []).append(alloc)

    def free_held(self):
        """Release every idle block to the device."""
        for bin_nr, blocks in self._free.items():
            for alloc in blocks:
                alloc.free()
                self.managed_bytes -= _alloc_size(bin_nr)
        self._free.clear()

    def stop_holding(self):
        self.free_held()


class PageLockedMemoryPool:
    """Keeps page-locked host buffers, by size, for reuse; ``allocate`` returns an array."""

    def __init__(self):
        self._free = {}
        self.active_blocks = 0

    @property
    def held_blocks(self):
        return sum(len(blocks) for blocks in self._free.values())

    def allocate(self, shape, dtype, order="C"):
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        nbytes = max(count * dtype.itemsize, 1)
        idle = self._free.get(nbytes)
        raw = idle.pop() if idle else drv.pagelocked_empty(nbytes, np.uint8)
        self.active_blocks += 1
        result = raw[: count * dtype.itemsize].view(dtype).reshape(shape, order=order)
        # Give the raw buffer back when the array the caller holds is collected.
        weakref.finalize(result, self._give_back, raw, nbytes)
        return result

    def _give_back(self, raw, nbytes):
        self.active_blocks -= 1
        self._free.setdefault(nbytes, []).append(raw)

    def free_held(self):
        self._free.clear()

    def stop_holding(self):
        self.free_held()
