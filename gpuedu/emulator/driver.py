"""``pycuda.driver`` on the CPU: devices, contexts, memory, copies, streams and events.

Device memory is host memory (see ``_memory.py``), so a copy is a ``ctypes.memmove``
and a device pointer is a host address.  Kernels run to completion when they are
launched, so every stream is always idle and asynchronous calls finish before they
return; streams and events still keep CUDA's rules (an event must be recorded
before it is timed, a context must be current before memory is allocated), so code
written against this module behaves the same on a real GPU.

Where real CUDA would silently corrupt memory (a copy that runs past the end of an
allocation), this module raises ``LogicError`` saying how many bytes were asked
for and how many the allocation holds: the teaching choice.
"""
import ctypes
import enum
import math
import mmap
import operator
import threading
import time

import numpy as np

from . import _activity, _device, _memory, _module
from ._alloc import DeviceAllocation, PointerHolderBase  # noqa: F401  (PyCUDA's names)
from ._args import ArgumentHandler, In, InOut, Out
from ._errors import CompileError, Error, LaunchError, LogicError, MemoryError, RuntimeError
from ._module import Function, Module, module_from_buffer, module_from_file  # noqa: F401  (PyCUDA's names)

__all__ = [
    "init", "get_version", "get_driver_version", "Device", "Context", "Stream", "Event",
    "mem_alloc", "mem_alloc_pitch", "mem_get_info", "memcpy_htod", "memcpy_dtoh", "memcpy_dtod",
    "memcpy_htod_async", "memcpy_dtoh_async", "memcpy_dtod_async", "memset_d8", "memset_d16",
    "memset_d32", "Memcpy2D", "memset_d8_async", "memset_d16_async", "memset_d32_async", "to_device",
    "from_device", "from_device_like", "pagelocked_empty", "pagelocked_zeros",
    "pagelocked_empty_like", "pagelocked_zeros_like", "register_host_memory",
    "PagelockedHostAllocation", "DeviceAllocation", "In", "Out", "InOut", "ArgumentHandler",
    "device_attribute", "ctx_flags", "event_flags", "host_alloc_flags", "mem_host_register_flags",
    "mem_attach_flags", "function_attribute", "func_cache", "shared_config", "limit",
    "Error", "LogicError", "LaunchError", "RuntimeError", "MemoryError", "CompileError",
]

# The CUDA version this emulation speaks (what PyCUDA reports it was built against).
_CUDA_VERSION = (12, 0, 0)


# --------------------------------------------------------------------------- enums

class _NamedIntEnum(enum.IntEnum):
    """An int enum that prints its name, as PyCUDA's (Boost.Python) enums do."""

    def __str__(self):
        return self.name


class device_attribute(_NamedIntEnum):  # noqa: N801 - PyCUDA's name
    # Values are CUDA's CUdevice_attribute numbers.
    MAX_THREADS_PER_BLOCK = 1
    MAX_BLOCK_DIM_X = 2
    MAX_BLOCK_DIM_Y = 3
    MAX_BLOCK_DIM_Z = 4
    MAX_GRID_DIM_X = 5
    MAX_GRID_DIM_Y = 6
    MAX_GRID_DIM_Z = 7
    MAX_SHARED_MEMORY_PER_BLOCK = 8
    TOTAL_CONSTANT_MEMORY = 9
    WARP_SIZE = 10
    MAX_PITCH = 11
    MAX_REGISTERS_PER_BLOCK = 12
    CLOCK_RATE = 13
    TEXTURE_ALIGNMENT = 14
    GPU_OVERLAP = 15
    MULTIPROCESSOR_COUNT = 16
    KERNEL_EXEC_TIMEOUT = 17
    INTEGRATED = 18
    CAN_MAP_HOST_MEMORY = 19
    COMPUTE_MODE = 20
    CONCURRENT_KERNELS = 31
    ECC_ENABLED = 32
    PCI_BUS_ID = 33
    PCI_DEVICE_ID = 34
    TCC_DRIVER = 35
    MEMORY_CLOCK_RATE = 36
    GLOBAL_MEMORY_BUS_WIDTH = 37
    L2_CACHE_SIZE = 38
    MAX_THREADS_PER_MULTIPROCESSOR = 39
    ASYNC_ENGINE_COUNT = 40
    UNIFIED_ADDRESSING = 41
    PCI_DOMAIN_ID = 50
    COMPUTE_CAPABILITY_MAJOR = 75
    COMPUTE_CAPABILITY_MINOR = 76
    MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81
    MAX_REGISTERS_PER_MULTIPROCESSOR = 82
    MANAGED_MEMORY = 83
    MULTI_GPU_BOARD = 84
    MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
    MAX_BLOCKS_PER_MULTIPROCESSOR = 106


class ctx_flags(_NamedIntEnum):  # noqa: N801
    SCHED_AUTO = 0
    SCHED_SPIN = 1
    SCHED_YIELD = 2
    SCHED_BLOCKING_SYNC = 4
    MAP_HOST = 8
    LMEM_RESIZE_TO_MAX = 16
    FLAGS_MASK = 31


class event_flags(_NamedIntEnum):  # noqa: N801
    DEFAULT = 0
    BLOCKING_SYNC = 1
    DISABLE_TIMING = 2
    INTERPROCESS = 4


class host_alloc_flags(_NamedIntEnum):  # noqa: N801
    PORTABLE = 1
    DEVICEMAP = 2
    WRITECOMBINED = 4


class mem_host_register_flags(_NamedIntEnum):  # noqa: N801
    PORTABLE = 1
    DEVICEMAP = 2


class mem_attach_flags(_NamedIntEnum):  # noqa: N801
    GLOBAL = 1
    HOST = 2
    SINGLE = 4


class function_attribute(_NamedIntEnum):  # noqa: N801
    MAX_THREADS_PER_BLOCK = 0
    SHARED_SIZE_BYTES = 1
    CONST_SIZE_BYTES = 2
    LOCAL_SIZE_BYTES = 3
    NUM_REGS = 4
    PTX_VERSION = 5
    BINARY_VERSION = 6
    CACHE_MODE_CA = 7
    MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
    PREFERRED_SHARED_MEMORY_CARVEOUT = 9


class func_cache(_NamedIntEnum):  # noqa: N801
    PREFER_NONE = 0
    PREFER_SHARED = 1
    PREFER_L1 = 2
    PREFER_EQUAL = 3


class shared_config(_NamedIntEnum):  # noqa: N801
    DEFAULT_BANK_SIZE = 0
    FOUR_BYTE_BANK_SIZE = 1
    EIGHT_BYTE_BANK_SIZE = 2


class limit(_NamedIntEnum):  # noqa: N801
    STACK_SIZE = 0
    PRINTF_FIFO_SIZE = 1
    MALLOC_HEAP_SIZE = 2


_limits = {limit.STACK_SIZE: 1024, limit.PRINTF_FIFO_SIZE: 1 << 20, limit.MALLOC_HEAP_SIZE: 8 << 20}


# --------------------------------------------------------------------------- init, versions

_initialized = False


def init(flags=0):
    """Initialise the driver (``cuInit``).  Must come before any other call, as in CUDA."""
    global _initialized
    if flags != 0:
        raise LogicError(f"cuInit failed: invalid value (flags must be 0, got {flags!r})")
    _initialized = True


def _require_init(call):
    if not _initialized:
        raise LogicError(f"{call} failed: initialization error (cuInit has not been called: "
                         "call pycuda.driver.init() first, or import pycuda.autoinit)")


def get_version():
    """The CUDA version as a tuple, e.g. ``(12, 0, 0)``."""
    return _CUDA_VERSION


def get_driver_version():
    """The driver's CUDA version as one int (1000 * major + 10 * minor), e.g. 12000."""
    return 1000 * _CUDA_VERSION[0] + 10 * _CUDA_VERSION[1]


# --------------------------------------------------------------------------- devices

def _attribute_values():
    cc = _device.COMPUTE_CAPABILITY
    return {
        device_attribute.MAX_THREADS_PER_BLOCK: _device.MAX_THREADS_PER_BLOCK,
        device_attribute.MAX_BLOCK_DIM_X: _device.MAX_BLOCK_DIM[0],
        device_attribute.MAX_BLOCK_DIM_Y: _device.MAX_BLOCK_DIM[1],
        device_attribute.MAX_BLOCK_DIM_Z: _device.MAX_BLOCK_DIM[2],
        device_attribute.MAX_GRID_DIM_X: _device.MAX_GRID_DIM[0],
        device_attribute.MAX_GRID_DIM_Y: _device.MAX_GRID_DIM[1],
        device_attribute.MAX_GRID_DIM_Z: _device.MAX_GRID_DIM[2],
        device_attribute.MAX_SHARED_MEMORY_PER_BLOCK: _device.MAX_SHARED_MEMORY_PER_BLOCK,
        device_attribute.TOTAL_CONSTANT_MEMORY: _device.TOTAL_CONSTANT_MEMORY,
        device_attribute.WARP_SIZE: _device.WARP_SIZE,
        device_attribute.MAX_PITCH: 2**31 - 1,
        device_attribute.MAX_REGISTERS_PER_BLOCK: _device.MAX_REGISTERS_PER_BLOCK,
        device_attribute.CLOCK_RATE: _device.CLOCK_RATE_KHZ,
        device_attribute.TEXTURE_ALIGNMENT: 512,
        device_attribute.GPU_OVERLAP: 0,          # copies and kernels never overlap here
        device_attribute.MULTIPROCESSOR_COUNT: _device.MULTIPROCESSOR_COUNT,
        device_attribute.KERNEL_EXEC_TIMEOUT: 0,
        device_attribute.INTEGRATED: 1,           # device memory *is* host memory
        device_attribute.CAN_MAP_HOST_MEMORY: 1,   # PagelockedHostAllocation.get_device_pointer
        device_attribute.COMPUTE_MODE: 0,
        device_attribute.CONCURRENT_KERNELS: 0,   # blocks and kernels run one at a time
        device_attribute.ECC_ENABLED: 0,
        device_attribute.PCI_BUS_ID: 0,
        device_attribute.PCI_DEVICE_ID: 0,
        device_attribute.TCC_DRIVER: 0,
        device_attribute.MEMORY_CLOCK_RATE: 0,
        device_attribute.GLOBAL_MEMORY_BUS_WIDTH: 64,
        device_attribute.L2_CACHE_SIZE: _device.L2_CACHE_SIZE,
        device_attribute.MAX_THREADS_PER_MULTIPROCESSOR: _device.MAX_THREADS_PER_BLOCK,
        device_attribute.ASYNC_ENGINE_COUNT: 0,
        device_attribute.UNIFIED_ADDRESSING: 1,
        device_attribute.PCI_DOMAIN_ID: 0,
        device_attribute.COMPUTE_CAPABILITY_MAJOR: cc[0],
        device_attribute.COMPUTE_CAPABILITY_MINOR: cc[1],
        device_attribute.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: _device.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        device_attribute.MAX_REGISTERS_PER_MULTIPROCESSOR: _device.MAX_REGISTERS_PER_BLOCK,
        device_attribute.MANAGED_MEMORY: 0,
        device_attribute.MULTI_GPU_BOARD: 0,
        device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: _device.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        device_attribute.MAX_BLOCKS_PER_MULTIPROCESSOR: 1,
    }


class Device:
    """The emulated device.  There is exactly one: ``Device(0)``."""

    def __init__(self, ordinal):
        _require_init("cuDeviceGet")
        if isinstance(ordinal, str):
            if ordinal != self._PCI_BUS_ID:
                raise LogicError(f"cuDeviceGetByPCIBusId failed: invalid value (the only device is "
                                 f"{self._PCI_BUS_ID!r}, got {ordinal!r})")
            ordinal = 0
        ordinal = int(ordinal)
        if not 0 <= ordinal < Device.count():
            raise LogicError(f"cuDeviceGet failed: invalid device ordinal ({ordinal}; the emulator has "
                             f"{Device.count()} device, numbered 0)")
        self._ordinal = ordinal

    _PCI_BUS_ID = "0000:00:00.0"

    @staticmethod
    def count():
        _require_init("cuDeviceGetCount")
        return 1

    def name(self):
        return _device.NAME

    def pci_bus_id(self):
        return self._PCI_BUS_ID

    def compute_capability(self):
        return tuple(_device.COMPUTE_CAPABILITY)

    def total_memory(self):
        """Bytes of host memory, which is the emulated device's memory."""
        return _memory.host_memory_info()[1]

    def get_attribute(self, attr):
        try:
            return _attribute_values()[device_attribute(int(attr))]
        except (ValueError, KeyError, TypeError):
            raise LogicError(f"cuDeviceGetAttribute failed: invalid value ({attr!r} is not a "
                             "pycuda.driver.device_attribute member)") from None

    def get_attributes(self):
        """Every attribute, as a dict keyed by ``device_attribute`` members."""
        return dict(_attribute_values())

    def __getattr__(self, name):
        # dev.max_threads_per_block is dev.get_attribute(device_attribute.MAX_THREADS_PER_BLOCK)
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            attr = device_attribute[name.upper()]
        except KeyError:
            raise AttributeError(f"'Device' object has no attribute {name!r}") from None
        return self.get_attribute(attr)

    def make_context(self, flags=0):
        """Create a context on this device and make it current (push it)."""
        _require_init("cuCtxCreate")
        ctx = Context(self, flags)
        ctx.push()
        return ctx

    def retain_primary_context(self):
        """The device's primary context (not made current: call ``push()`` on it)."""
        _require_init("cuDevicePrimaryCtxRetain")
        global _primary_context
        if _primary_context is None or _primary_context._detached:
            _primary_context = Context(self, 0)
        return _primary_context

    def __eq__(self, other):
        return isinstance(other, Device) and other._ordinal == self._ordinal

    def __hash__(self):
        return hash(("gpuedu-device", self._ordinal))

    def __int__(self):
        return self._ordinal

    def __repr__(self):
        return f"<Device {self._ordinal}: {_device.NAME}>"


# --------------------------------------------------------------------------- contexts

# As in CUDA, each host thread has its own stack of current contexts: a thread
# that never pushed one has none, and memory calls from it fail the same way.
_thread_state = threading.local()
_primary_context = None


def _stack():
    try:
        return _thread_state.contexts
    except AttributeError:
        _thread_state.contexts = []
        return _thread_state.contexts


class Context:
    """A CUDA context.  Create one with ``Device.make_context()``; it is then current."""

    def __init__(self, device, flags=0):
        self._device = device
        self.flags = flags
        self._detached = False

    def push(self):
        if self._detached:
            raise LogicError("cuCtxPushCurrent failed: invalid context (this context was detached)")
        _stack().append(self)

    @staticmethod
    def pop():
        """Make the current context not current; the one below it (if any) becomes current."""
        if not _stack():
            raise LogicError("cuCtxPopCurrent failed: invalid context (no context is current)")
        return _stack().pop()

    @staticmethod
    def get_current():
        """The current context, or None."""
        stack = _stack()
        return stack[-1] if stack else None

    @staticmethod
    def get_device():
        """The device of the current context."""
        return _require_context("cuCtxGetDevice")._device

    @staticmethod
    def synchronize():
        """Wait for all work in the current context; kernels here finish at launch."""
        _require_context("cuCtxSynchronize")
        _activity.emit("context_synchronize")

    def detach(self):
        """Drop this context: pop it if current; it cannot be used afterwards."""
        stack = _stack()
        while self in stack:
            stack.remove(self)
        self._detached = True

    @staticmethod
    def get_limit(which):
        _require_context("cuCtxGetLimit")
        return _limits[limit(int(which))]

    @staticmethod
    def set_limit(which, value):
        _require_context("cuCtxSetLimit")
        which = limit(int(which))
        value = int(value)
        if value < 0:
            raise LogicError(f"cuCtxSetLimit failed: invalid argument: {which.name} = {value} is negative")
        _limits[which] = value
        if which == limit.MALLOC_HEAP_SIZE:
            _module.HEAP.limit = value
        if which == limit.PRINTF_FIFO_SIZE:
            _module.set_printf_limit(value)

    @staticmethod
    def get_cache_config():
        _require_context("cuCtxGetCacheConfig")
        return func_cache.PREFER_NONE

    @staticmethod
    def set_cache_config(config):
        _require_context("cuCtxSetCacheConfig")
        func_cache(int(config))  # validates; the CPU has no L1/shared split to choose

    @staticmethod
    def get_shared_config():
        _require_context("cuCtxGetSharedMemConfig")
        return shared_config.FOUR_BYTE_BANK_SIZE

    @staticmethod
    def set_shared_config(config):
        _require_context("cuCtxSetSharedMemConfig")
        shared_config(int(config))

    def get_api_version(self):
        return get_driver_version()

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def __repr__(self):
        state = "detached" if self._detached else ("current" if Context.get_current() is self else "")
        return f"<Context on {self._device!r}{' ' + state if state else ''}>"


def _require_context(call):
    _require_init(call)
    stack = _stack()
    if not stack:
        raise LogicError(f"{call} failed: invalid device context (no context is current: "
                         "import pycuda.autoinit, or ctx = pycuda.driver.Device(0).make_context())")
    return stack[-1]


# --------------------------------------------------------------------------- device memory

def mem_alloc(nbytes):
    """Allocate ``nbytes`` of device memory; returns a ``DeviceAllocation``."""
    _require_context("cuMemAlloc")
    nbytes = _as_count(nbytes, "cuMemAlloc", "bytes")
    if nbytes == 0:
        raise LogicError("cuMemAlloc failed: invalid value (cannot allocate 0 bytes)")
    return DeviceAllocation(nbytes)


def mem_alloc_like(ary):
    """Allocate as many bytes of device memory as the array ``ary`` holds."""
    return mem_alloc(ary.nbytes)


def mem_alloc_pitch(width, height, access_size):
    """Allocate ``height`` rows of ``width`` bytes, each row padded to a pitch; returns (alloc, pitch)."""
    _require_context("cuMemAllocPitch")
    width = _as_count(width, "cuMemAllocPitch", "width")
    height = _as_count(height, "cuMemAllocPitch", "height")
    if access_size not in (4, 8, 16):
        raise LogicError(f"cuMemAllocPitch failed: invalid value (access_size must be 4, 8 or 16, "
                         f"got {access_size!r})")
    pitch = -(-width // _PITCH_ALIGNMENT) * _PITCH_ALIGNMENT  # rows start on 512-byte boundaries
    return mem_alloc(max(pitch * height, 1)), pitch


_PITCH_ALIGNMENT = 512


def mem_get_info():
    """``(free, total)`` bytes: the host's available and total memory."""
    _require_context("cuMemGetInfo")
    return _memory.host_memory_info()


def _as_count(value, call, what):
    try:
        n = operator.index(value)    # an int or NumPy integer; 1.5 or "8" is a mistake, not a size
    except TypeError:
        hint = f" (write int({value!r}) if you mean to round it)" if isinstance(value, (float, np.floating)) else ""
        raise TypeError(f"{call}: {what} must be an integer, got {type(value).__name__} {value!r}{hint}") from None
    if n < 0:
        raise LogicError(f"{call} failed: invalid value ({what} must be >= 0, got {n})")
    return n


def _device_address(ptr, nbytes, call, role):
    """Check that ``nbytes`` starting at device pointer ``ptr`` lie inside one live allocation."""
    try:
        if isinstance(ptr, (str, bytes, float, np.floating)):
            raise TypeError
        address = int(ptr)
    except TypeError:
        raise TypeError(f"{call}: the {role} must be a device pointer (a DeviceAllocation or an int "
                        f"address), got {type(ptr).__name__}") from None
    found = _memory.find(address)
    if found is None:
        if (why := _memory.describe_invalid(address)) is not None:
            raise LogicError(f"{call} failed: the {role} is not device memory: {why}")
        raise LogicError(f"{call} failed: the {role} 0x{address:x} is not in any live device allocation "
                         "(a host address, or memory freed long ago?)")
    alloc, offset = found
    if offset < 0 or offset > alloc.size:
        raise LogicError(f"{call} failed: the {role} 0x{address:x} lies {offset} bytes from the start of "
                         f"an allocation of {alloc.size} bytes, outside it")
    if offset + nbytes > alloc.size:
        where = f" at offset {offset}" if offset else ""
        raise LogicError(f"{call} failed: {nbytes} bytes asked for{where}, but the {role} allocation "
                         f"holds {alloc.size} bytes ({alloc.size - offset} from that address): "
                         "the copy would run past its end")
    return address


def _host_buffer(obj, call, role, writeable):
    """Address and byte size of a host buffer; it must be contiguous (and writeable for a destination)."""
    if isinstance(obj, np.ndarray):
        ary = obj
    else:
        try:
            view = memoryview(obj)
        except TypeError:
            raise TypeError(f"{call}: the {role} must be a numpy array (or another buffer), "
                            f"got {type(obj).__name__}") from None
        if not view.contiguous:
            raise ValueError(f"{call}: the {role} buffer is not contiguous")
        ary = np.frombuffer(view, dtype=np.uint8) if view.nbytes else np.empty(0, np.uint8)
        if writeable and view.readonly:
            raise ValueError(f"{call}: the {role} is read-only; copy into a writeable array")
    if not (ary.flags.c_contiguous or ary.flags.f_contiguous):
        raise ValueError(f"{call}: the {role} array is not contiguous (strides {ary.strides}); "
                         "pass np.ascontiguousarray(a) or copy into a contiguous array")
    if writeable and not ary.flags.writeable:
        raise ValueError(f"{call}: the {role} array is read-only; copy into a writeable array "
                         "(e.g. np.empty_like(a))")
    return ary.ctypes.data, ary.nbytes


def _check_stream(stream):
    if stream is not None and not isinstance(stream, Stream):
        raise TypeError(f"stream must be a pycuda.driver.Stream or None, got {type(stream).__name__}")


def memcpy_htod(dest, src):
    """Copy the host buffer ``src`` (all of it) to device pointer ``dest``."""
    _copy_htod(dest, src, None, False)


def memcpy_dtoh(dest, src):
    """Fill the host buffer ``dest`` (all of it) from device pointer ``src``."""
    _copy_dtoh(dest, src, None, False)


def memcpy_dtod(dest, src, size):
    """Copy ``size`` bytes from device pointer ``src`` to device pointer ``dest``."""
    _copy_dtod(dest, src, size, None, False)


# Kernels and copies run in issue order on the one CPU "device", so an asynchronous
# copy is complete when the call returns: exactly what a stream guarantees, only sooner.
# (A recorder, gpuedu.trace(), hears of each with its stream, to lay them out as a GPU would.)
def memcpy_htod_async(dest, src, stream=None):
    _check_stream(stream)
    _copy_htod(dest, src, stream, True)


def memcpy_dtoh_async(dest, src, stream=None):
    _check_stream(stream)
    _copy_dtoh(dest, src, stream, True)


def memcpy_dtod_async(dest, src, size, stream=None):
    _check_stream(stream)
    _copy_dtod(dest, src, size, stream, True)


def _copy_htod(dest, src, stream, is_async):
    with _activity.call("copy", direction="htod", stream=_activity.stream_id(stream), is_async=is_async) as info:
        src_address, nbytes = _host_buffer(src, "cuMemcpyHtoD", "source", writeable=False)
        dest_address = _device_address(dest, nbytes, "cuMemcpyHtoD", "destination")
        ctypes.memmove(dest_address, src_address, nbytes)
        if _activity.active():
            info.update(bytes=nbytes, pinned=_activity.is_pinned(src))


def _copy_dtoh(dest, src, stream, is_async):
    with _activity.call("copy", direction="dtoh", stream=_activity.stream_id(stream), is_async=is_async) as info:
        dest_address, nbytes = _host_buffer(dest, "cuMemcpyDtoH", "destination", writeable=True)
        src_address = _device_address(src, nbytes, "cuMemcpyDtoH", "source")
        ctypes.memmove(dest_address, src_address, nbytes)
        if _activity.active():
            info.update(bytes=nbytes, pinned=_activity.is_pinned(dest))


def _copy_dtod(dest, src, size, stream, is_async):
    with _activity.call("copy", direction="dtod", stream=_activity.stream_id(stream), is_async=is_async) as info:
        size = _as_count(size, "cuMemcpyDtoD", "size")
        dest_address = _device_address(dest, size, "cuMemcpyDtoD", "destination")
        src_address = _device_address(src, size, "cuMemcpyDtoD", "source")
        ctypes.memmove(dest_address, src_address, size)
        info.update(bytes=size, pinned=False)


def _memset(dest, data, count, ctype, call):
    count = _as_count(count, call, "count")
    width = ctypes.sizeof(ctype)
    address = _device_address(dest, count * width, call, "destination")
    if width == 1:
        ctypes.memset(address, int(data) & 0xFF, count)
        return
    # Write the pattern through a NumPy view of the device words.
    words = (ctype * count).from_address(address)
    np.frombuffer(words, dtype=np.dtype(f"u{width}"))[:] = int(data) & ((1 << (8 * width)) - 1)


def memset_d8(dest, data, count):
    """Set ``count`` bytes at ``dest`` to ``data``."""
    _memset(dest, data, count, ctypes.c_uint8, "cuMemsetD8")


def memset_d16(dest, data, count):
    """Set ``count`` 16-bit words at ``dest`` to ``data``."""
    _memset(dest, data, count, ctypes.c_uint16, "cuMemsetD16")


def memset_d32(dest, data, count):
    """Set ``count`` 32-bit words at ``dest`` to ``data`` (an unsigned int bit pattern)."""
    _memset(dest, data, count, ctypes.c_uint32, "cuMemsetD32")


def memset_d8_async(dest, data, count, stream=None):
    _check_stream(stream)
    memset_d8(dest, data, count)


def memset_d16_async(dest, data, count, stream=None):
    _check_stream(stream)
    memset_d16(dest, data, count)


def memset_d32_async(dest, data, count, stream=None):
    _check_stream(stream)
    memset_d32(dest, data, count)


def to_device(buf):
    """Allocate device memory the size of ``buf``, copy ``buf`` there, return the allocation."""
    _, nbytes = _host_buffer(buf, "to_device", "source", writeable=False)
    alloc = mem_alloc(max(nbytes, 1))
    memcpy_htod(alloc, buf)
    return alloc


def from_device(devptr, shape, dtype, order="C"):
    """A new host array of ``shape``/``dtype`` filled from device pointer ``devptr``."""
    result = np.empty(shape, dtype, order=order)
    memcpy_dtoh(result, devptr)
    return result


def from_device_like(devptr, other_ary):
    """A new host array like ``other_ary`` filled from device pointer ``devptr``."""
    result = np.empty_like(other_ary)
    memcpy_dtoh(result, devptr)
    return result


class Memcpy2D:
    """A copy of ``height`` rows of ``width_in_bytes`` between pitched buffers (``cuMemcpy2D``).

    Set the source with ``set_src_host(array)`` or ``set_src_device(ptr)`` and the
    destination likewise, the pitches (bytes from one row to the next) and the
    sizes, then call it: ``copy()`` (or ``copy(stream)``).
    """

    def __init__(self):
        self.src_x_in_bytes = self.src_y = self.dst_x_in_bytes = self.dst_y = 0
        self.src_pitch = self.dst_pitch = self.width_in_bytes = self.height = None
        self._src = self._dst = None

    def set_src_host(self, buf):
        self._src = ("host", buf)

    def set_src_device(self, ptr):
        self._src = ("device", ptr)

    def set_dst_host(self, buf):
        self._dst = ("host", buf)

    def set_dst_device(self, ptr):
        self._dst = ("device", ptr)

    @staticmethod
    def _start(side, role, extent):
        """The buffer's start address, after checking that it holds ``extent`` bytes."""
        kind, obj = side
        if kind == "device":
            return _device_address(obj, extent, "cuMemcpy2D", role)
        address, nbytes = _host_buffer(obj, "cuMemcpy2D", role, writeable=role == "destination")
        if extent > nbytes:
            raise LogicError(f"cuMemcpy2D failed: the copy reaches byte {extent} of the host {role}, "
                             f"which holds {nbytes} bytes")
        return address

    def __call__(self, stream=None, aligned=False):
        if isinstance(stream, bool):   # copy(True): the aligned flag given positionally
            stream = None
        _check_stream(stream)
        if self._src is None or self._dst is None:
            raise LogicError("cuMemcpy2D failed: set the source and the destination first "
                             "(set_src_host/set_src_device, set_dst_host/set_dst_device)")
        width, height = self.width_in_bytes, self.height
        if width is None or height is None:
            raise LogicError("cuMemcpy2D failed: set width_in_bytes and height first")
        src_pitch = width if self.src_pitch is None else self.src_pitch
        dst_pitch = width if self.dst_pitch is None else self.dst_pitch
        if src_pitch < width or dst_pitch < width:
            raise LogicError(f"cuMemcpy2D failed: a pitch ({src_pitch}, {dst_pitch}) is smaller than the "
                             f"row width ({width} bytes)")
        if height == 0 or width == 0:
            return
        # Row r starts at (y + r) * pitch + x; the last row ends width bytes later.
        src_first = self.src_y * src_pitch + self.src_x_in_bytes
        dst_first = self.dst_y * dst_pitch + self.dst_x_in_bytes
        src = self._start(self._src, "source", src_first + (height - 1) * src_pitch + width)
        dst = self._start(self._dst, "destination", dst_first + (height - 1) * dst_pitch + width)
        for row in range(height):
            ctypes.memmove(dst + dst_first + row * dst_pitch, src + src_first + row * src_pitch, width)


# --------------------------------------------------------------------------- page-locked host memory

class PagelockedHostAllocation(mmap.mmap):
    """The memory behind a ``pagelocked_*`` array (its ``.base``).

    On a GPU machine page-locked memory cannot be swapped out, which lets the GPU's copy
    engines read it directly; here it is ordinary page-aligned host memory.
    """

    def get_flags(self):
        return getattr(self, "_flags", 0)

    def get_device_pointer(self):
        """The address kernels use for this memory (mapped, "zero-copy" memory).

        Only for memory allocated with ``host_alloc_flags.DEVICEMAP``, as in CUDA.  In the
        emulator the device reads host memory directly, so it is the host address.
        """
        if not self.get_flags() & host_alloc_flags.DEVICEMAP:
            raise LogicError("cuMemHostGetDevicePointer failed: invalid value (allocate with "
                             "mem_flags=host_alloc_flags.DEVICEMAP to map host memory into the device)")
        address = ctypes.addressof(ctypes.c_char.from_buffer(self))
        if not getattr(self, "_mapped", False):   # kernels may be given it from now on
            _memory.register_mapped(address, len(self), self)
            self._mapped = True
        return address

    def free(self):
        """Release the memory; arrays over it must no longer be used."""
        try:
            self.close()
        except BufferError:
            raise LogicError("cannot free page-locked memory while arrays still use it; "
                             "delete the arrays instead") from None


_activity.PINNED_TYPES = (PagelockedHostAllocation,)


def _pagelocked(shape, dtype, order, mem_flags):
    dtype = np.dtype(dtype)
    if order not in ("C", "F"):
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    count = math.prod(operator.index(n) for n in shape) if np.ndim(shape) else operator.index(shape)
    nbytes = count * dtype.itemsize
    _memory.check_size(nbytes, "cannot allocate page-locked host memory of")
    buf = PagelockedHostAllocation(-1, max(nbytes, 1))
    buf._flags = int(mem_flags)
    return np.ndarray(shape, dtype, buffer=buf, order=order)


def pagelocked_empty(shape, dtype, order="C", mem_flags=0):
    """An uninitialised host array in page-locked memory (ordinary memory in the emulator)."""
    return _pagelocked(shape, dtype, order, mem_flags)


def pagelocked_zeros(shape, dtype, order="C", mem_flags=0):
    result = _pagelocked(shape, dtype, order, mem_flags)
    result.fill(0)
    return result


def pagelocked_empty_like(array, mem_flags=0):
    order = "F" if array.flags.f_contiguous and not array.flags.c_contiguous else "C"
    return _pagelocked(array.shape, array.dtype, order, mem_flags)


def pagelocked_zeros_like(array, mem_flags=0):
    result = pagelocked_empty_like(array, mem_flags)
    result.fill(0)
    return result


def register_host_memory(ary, flags=0):
    """Page-lock an existing array (a no-op here); returns the array."""
    if not isinstance(ary, np.ndarray):
        raise TypeError(f"register_host_memory takes a numpy array, got {type(ary).__name__}")
    if not ary.flags.c_contiguous and not ary.flags.f_contiguous:
        raise ValueError("register_host_memory needs a contiguous array")
    return ary


# --------------------------------------------------------------------------- streams and events

class Stream:
    """A queue of work.  Work here completes when issued, so a stream is always done."""

    def __init__(self, flags=0):
        _require_context("cuStreamCreate")
        self.flags = flags

    def synchronize(self):
        _activity.emit("stream_synchronize", stream=_activity.stream_id(self))

    def is_done(self):
        return True

    def wait_for_event(self, event):
        if not isinstance(event, Event):
            raise TypeError(f"wait_for_event takes a pycuda.driver.Event, got {type(event).__name__}")
        _activity.emit("stream_wait_event", stream=_activity.stream_id(self), event=id(event))

    @property
    def handle(self):
        return id(self)

    def __repr__(self):
        return f"<Stream 0x{id(self):x}>"


class Event:
    """A marker in a stream; ``record()`` stamps it with the host clock (``time.perf_counter``)."""

    def __init__(self, flags=0):
        _require_context("cuEventCreate")
        self.flags = int(flags)
        self._time = None

    def record(self, stream=None):
        _check_stream(stream)
        # Everything issued before this point has already finished, so "now" is when
        # the stream reaches the event.
        self._time = time.perf_counter()
        _activity.emit("event_record", stream=_activity.stream_id(stream), event=id(self))
        return self

    def synchronize(self):
        _activity.emit("event_synchronize", event=id(self))
        return self

    def query(self):
        """True when the work before the event is done (always, once issued)."""
        return True

    def time_since(self, other):
        """Milliseconds from event ``other`` to this event."""
        return _elapsed_ms(other, self, "time_since")

    def time_till(self, other):
        """Milliseconds from this event to event ``other``."""
        return _elapsed_ms(self, other, "time_till")

    @property
    def handle(self):
        return id(self)

    def __repr__(self):
        return f"<Event {'recorded' if self._time is not None else 'not recorded'}>"


def _elapsed_ms(start, end, call):
    for event in (start, end):
        if not isinstance(event, Event):
            raise TypeError(f"{call} takes a pycuda.driver.Event, got {type(event).__name__}")
        if event.flags & event_flags.DISABLE_TIMING:
            raise LogicError("cuEventElapsedTime failed: invalid resource handle (an event created "
                             "with event_flags.DISABLE_TIMING cannot be timed)")
        if event._time is None:
            raise LogicError("cuEventElapsedTime failed: invalid resource handle (an event was never "
                             "recorded: call event.record() before timing it)")
    return (end._time - start._time) * 1000.0


# --------------------------------------------------------------------------- modules and functions

def __getattr__(name):
    raise AttributeError(f"module 'pycuda.driver' has no attribute {name!r}")
