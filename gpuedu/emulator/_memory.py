"""Device memory for the CPU emulator: host pages between wide inaccessible gaps.

A device pointer is a plain host address, so the kernel (compiled C++) can
dereference it.  Device memory is carved out of a region of address space
reserved 64 GiB at a time as buffers need it (up to 1 TiB, inaccessible until
used): each allocation gets whole
pages, placed so that its end touches the next inaccessible gap, and 64 MiB of gap
separate neighbours. A kernel that writes or reads past the end of a buffer (the
classic missing bounds guard), or anywhere up to 64 MiB past it (an index a
stride too far: 16 million floats), faults at once, in memory no other buffer and
nothing of the host's uses, instead of landing in the next ``GPUArray``; the
launcher turns the fault into a ``LaunchError`` that names the allocation. Where the region cannot be reserved (an address-space limit, ulimit
-v), each allocation is its own mapping with one guard page on each side.

The start is kept 16-byte aligned, enough for ``float4`` and ``double2``
accesses, so a size that is not a multiple of 16 leaves slack between the end
and the guard page, as cudaMalloc's 256-byte alignment does on a GPU. The slack,
and the 16 bytes before the start, hold a known pattern: after each launch the
emulator checks those of the allocations passed to the kernel, so a write one
element past the end (or just before the start) is an error there too, as
compute-sanitizer reports it on a GPU (``watched_writes``).
"""

import bisect
import collections
import ctypes
import mmap
import os
import sys
import threading
import weakref

from ._errors import LogicError, MemoryError

PAGE = mmap.PAGESIZE
ALIGN = 16

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.mprotect.restype = ctypes.c_int
_PROT_NONE = 0

_PROT_READ_WRITE = mmap.PROT_READ | mmap.PROT_WRITE

#: What the watched bytes around an allocation hold (0xa5: no float, int or pointer a kernel computes is
#: likely to be made of it); ``FRONT`` of them sit just before the start, the slack after the end.
PATTERN_BYTE = 0xA5
FRONT = 16
_PATTERNS = [bytes([PATTERN_BYTE]) * n for n in range(max(FRONT, ALIGN) + 1)]   # by length

# Reentrant: the garbage collector may run a DeviceAllocation's finaliser on this thread while it holds the lock
# (a tuple made inside it can start a collection); such a release is put off until the lock is let go
# (release_dropped), and must not wait for the lock it is inside.
_lock = threading.RLock()
_dropped = []         # (allocation, where) released by a finaliser inside the lock: released after it
_starts = []          # sorted user-visible start addresses of live allocations
_by_start = {}        # start address -> Allocation

# Released mappings kept for reuse, by mapping size.  The first touch of a fresh page
# costs a page fault (about 10 ms for 16 MB on a 2-core CI machine, several times the
# arithmetic a GPUArray temporary of that size needs); a kept mapping is only zeroed
# again.  While kept, its pages are inaccessible, so a kernel that uses a freed
# pointer still faults.
_KEEP_LIMIT = 256 << 20
_kept = {}            # mapping bytes -> [(mmap, base address)]
_kept_bytes = 0


# The reserved region: slots of [gap][pages], handed out from the bottom up and reused by size. Address space
# only (nothing is committed until a slot is used), reserved a chunk at a time as slots are needed: a chunk of
# 64 GiB holds about 1,000 small buffers, and up to 1 TiB is reserved in all. (Reserving the whole terabyte at once
# cost nothing natively, but 6 GB of qemu-user's own tables for every process of the arm64 leg, which runs through
# qemu: it killed a test worker there.)
REGION_BYTES = 1 << 40
CHUNK_BYTES = 64 << 30
# 64 MiB: an index 16 million floats past a buffer's end (or before its start) still faults in its gap instead
# of landing in the neighbouring buffer, a GPUArray the kernel was never given (16,000 small buffers fit the
# region; past that, each gets a mapping of its own).
GAP = max(64 << 20, PAGE)
_MAP_PRIVATE, _MAP_ANONYMOUS = mmap.MAP_PRIVATE, mmap.MAP_ANONYMOUS
_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)
_MADV_DONTNEED = 4
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mmap.restype = ctypes.c_void_p
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.madvise.restype = ctypes.c_int
_region = None        # [base, end, next free address] of the chunk in use; False when none can be reserved
_reserved_bytes = 0   # of all the chunks reserved so far
_free_slots = {}      # slot bytes -> [(slot start, whether its pages still hold data)]
_resident_bytes = 0   # bytes of freed slots whose pages were kept (up to _KEEP_LIMIT)


def _address_space_limit():
    """This process's address-space limit in bytes (ulimit -v), or None when it has none."""
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        return None if soft in (-1, resource.RLIM_INFINITY) else soft
    except (ImportError, OSError, ValueError):
        return None


def _reserve_region():
    """Reserve the next chunk of the region (inaccessible, no memory committed); ``_region`` is False where none
    can be (an address-space limit, which a reservation would count against: buffers are then mapped one by one)."""
    global _region, _reserved_bytes
    if _address_space_limit() is not None or _reserved_bytes + CHUNK_BYTES > REGION_BYTES:
        _region = False
        return
    base = _libc.mmap(None, CHUNK_BYTES, _PROT_NONE, _MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_NORESERVE, -1, 0)
    if base is None or base == ctypes.c_void_p(-1).value:
        _region = False
        return
    _reserved_bytes += CHUNK_BYTES
    _region = [base, base + CHUNK_BYTES, base]


def _take_slot(pages):
    """``(slot start, slot bytes, pages hold old data)`` for ``pages`` bytes of buffer, or None if the region
    is full or absent. Called with _lock held."""
    global _resident_bytes
    if _region is None:
        _reserve_region()
    if not _region:
        return None
    size = GAP + pages
    free = _free_slots.get(size)
    if free:
        start, dirty = free.pop()
        if dirty:
            _resident_bytes -= pages
        return start, size, dirty
    if _region[2] + size + GAP > _region[1]:      # this chunk is full: the next one (a gap ends each chunk)
        if size + GAP > CHUNK_BYTES:
            return None                           # a buffer larger than a chunk gets a mapping of its own
        _reserve_region()
        if not _region:
            return None
    start = _region[2]
    _region[2] = start + size
    return start, size, False


class Allocation:
    """One live region: ``address`` (int) and ``size`` (bytes asked for)."""

    __slots__ = ("address", "size", "_map", "_map_base", "_map_end", "_slot", "_front", "_back", "_watch",
                 "__weakref__")

    def __init__(self, address, size, map_obj, map_base):
        self.address = address
        self.size = size
        self._map = map_obj
        self._map_base = map_base        # where the inaccessible memory below the buffer begins
        self._map_end = None             # and where the inaccessible memory above it ends
        self._slot = None                # (start, bytes) of its slot in the reserved region
        self._front = self._back = 0     # watched bytes before the start and after the end
        self._watch = None               # what watched_writes reads (_watch_words)

    @property
    def is_device_memory(self):
        """True for an allocation, False for a module's variable made known by ``register_external``."""
        return self._map_end is not None

    @property
    def guard_start(self):
        """First address of the guard page right after the buffer."""
        return self.address + _round_up(max(self.size, 1), ALIGN)

    def __repr__(self):
        return f"<Allocation 0x{self.address:x}, {self.size} bytes>"


def after_fork_in_child():
    """In a child made by fork(): a lock another thread of the parent held stays held for good; make it afresh."""
    global _lock
    _lock = threading.RLock()


def _round_up(n, m):
    return (n + m - 1) // m * m


#: No machine's address space holds more (x86-64 and aarch64 with 5-level / 52-bit tables: 2^57 bytes at most).
ADDRESS_SPACE_BYTES = 1 << 57


def check_size(nbytes, what="cannot allocate"):
    """A ValueError for a size no machine could hold, which says the size and where such numbers come from."""
    if nbytes > ADDRESS_SPACE_BYTES:
        raise ValueError(f"{what} {nbytes:,} bytes (about 2^{nbytes.bit_length() - 1}): more than any machine's "
                         f"address space holds ({ADDRESS_SPACE_BYTES:,} bytes, 2^57). Such a size is a mistake in "
                         f"its arithmetic: a negative number made unsigned, a product that overflowed, a shape's "
                         f"dimensions given in bytes, or the wrong variable")


def allocate(nbytes):
    """Map ``nbytes`` of zero-filled memory between two guard pages; return an Allocation."""
    if _dropped:
        _release_dropped()
    nbytes = int(nbytes)
    if nbytes < 0:
        raise LogicError(f"cannot allocate a negative number of bytes ({nbytes})")
    check_size(nbytes, "cannot allocate")
    body = _round_up(max(nbytes, 1), ALIGN)
    pages = _round_up(body, PAGE)
    with _lock:
        slot = _take_slot(pages)
    if slot is not None:
        start, size, dirty = slot
        if _libc.mprotect(start + GAP, pages, _PROT_READ_WRITE) != 0:
            with _lock:
                _free_slots.setdefault(size, []).append((start, False))
            raise MemoryError(f"cannot allocate {nbytes} bytes of emulated device memory: "
                              f"{os.strerror(ctypes.get_errno())}")
        if dirty:
            ctypes.memset(start + GAP, 0, pages)   # device memory starts zeroed, reused or not
        address = start + GAP + pages - body
        alloc = Allocation(address, nbytes, None, start)
        alloc._map_end = start + size + GAP
        alloc._slot = (start, size)
        return _register(alloc, body, pages)
    total = pages + 2 * PAGE
    reused = _take_kept(total)
    if reused is not None:
        m, base = reused
        _protect(base + PAGE, pages, _PROT_READ_WRITE)
        ctypes.memset(base + PAGE, 0, pages)   # device memory starts zeroed, reused or not
    else:
        try:
            m = mmap.mmap(-1, total, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                          prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as exc:
            raise MemoryError(f"cannot allocate {nbytes} bytes of emulated device memory: {exc}") from None
        base = ctypes.addressof(ctypes.c_char.from_buffer(m))
        for guard in (base, base + PAGE + pages):
            _protect(guard, PAGE, _PROT_NONE)
    address = base + PAGE + pages - body
    alloc = Allocation(address, nbytes, m, base)
    alloc._map_end = base + 2 * PAGE + pages
    return _register(alloc, body, pages)


def _register(alloc, body, pages):
    alloc._front = min(FRONT, pages - body)       # none when the start touches the inaccessible page below
    alloc._back = body - alloc.size
    _fill_watched(alloc)
    alloc._watch = _watch_words(alloc, alloc.address + body)
    with _lock:
        bisect.insort(_starts, alloc.address)
        _by_start[alloc.address] = alloc
    return alloc


def _fill_watched(alloc):
    if alloc._front:
        ctypes.memset(alloc.address - alloc._front, PATTERN_BYTE, alloc._front)
    if alloc._back:
        ctypes.memset(alloc.address + alloc.size, PATTERN_BYTE, alloc._back)


_WORDS = ctypes.c_uint64 * 2
_ALL = (1 << 64) - 1
_PATTERN_WORD = int.from_bytes(_PATTERNS[8], sys.byteorder)


def _watch_words(alloc, body_end):
    """What ``watched_writes`` reads: the 16 bytes before the start and the last 16 bytes of the body, as two
    64-bit words each, with masks of the watched bytes (the body's last 16 bytes hold the end of the data
    too). Reading words through ctypes views made once is several times cheaper than copying bytes out."""
    checks = []
    if alloc._front:
        checks.append((_WORDS.from_address(alloc.address - FRONT), _ALL, _ALL))
    if alloc._back:
        watched = bytes(ALIGN - alloc._back) + b"\xff" * alloc._back
        low = int.from_bytes(watched[:8], sys.byteorder)
        high = int.from_bytes(watched[8:], sys.byteorder)
        checks.append((_WORDS.from_address(body_end - ALIGN), low, high))
    return tuple((words, low, high, _PATTERN_WORD & low, _PATTERN_WORD & high) for words, low, high in checks)


def watched_writes(address):
    """Whether a kernel wrote the watched bytes around the allocation that holds ``address``: None, or
    ``(allocation, first changed offset, last changed offset)`` (offsets from its start: negative before it,
    ``size`` or more past its end). The pattern is put back, so the same write is reported once.
    (Called for every pointer argument of every launch: the usual path reads two or four words.)"""
    alloc = _by_start.get(address)
    if alloc is None:
        found = find(address)
        if found is None:
            return None
        alloc = found[0]
    watch = alloc._watch
    if not watch:
        return None
    for words, low, high, want_low, want_high in watch:
        if words[0] & low != want_low or words[1] & high != want_high:
            break
    else:
        return None
    changed = [k - alloc._front for k, b in enumerate(ctypes.string_at(alloc.address - alloc._front, alloc._front))
               if b != PATTERN_BYTE]
    if not changed:
        changed = [alloc.size + k for k, b in enumerate(ctypes.string_at(alloc.address + alloc.size, alloc._back))
                   if b != PATTERN_BYTE]
    _fill_watched(alloc)
    return alloc, changed[0], changed[-1]


def _protect(address, size, prot):
    if _libc.mprotect(address, size, prot) != 0:  # pragma: no cover - only on exotic hosts
        err = ctypes.get_errno()
        raise MemoryError(f"mprotect failed: {os.strerror(err)}")


def _take_kept(total):
    global _kept_bytes
    with _lock:
        kept = _kept.get(total)
        if not kept:
            return None
        _kept_bytes -= total
        return kept.pop()


def _keep(m, base):
    """Keep a released mapping for reuse (body made inaccessible); False when the cache is full."""
    global _kept_bytes
    total = len(m)
    with _lock:
        if _kept_bytes + total > _KEEP_LIMIT:
            return False
        _kept_bytes += total
    _protect(base + PAGE, total - 2 * PAGE, _PROT_NONE)
    with _lock:
        _kept.setdefault(total, []).append((m, base))
    return True


def register_external(address, size):
    """Make ``size`` bytes at ``address`` that live elsewhere known to ``find``, for good.

    Used for a loaded module's ``__device__`` and ``__constant__`` variables, so that
    ``memcpy_htod(module.get_global(name)[0], host)`` passes the copy checks.  The
    region has no guard pages and is never released.
    """
    alloc = Allocation(int(address), int(size), None, int(address))
    with _lock:
        existing = _by_start.get(alloc.address)
        if existing is not None:
            return existing
        bisect.insort(_starts, alloc.address)
        _by_start[alloc.address] = alloc
    return alloc


def register_mapped(address, size, owner):
    """Make mapped host memory (``pagelocked_*`` with ``DEVICEMAP``) known to ``find`` while ``owner`` lives: a
    kernel may be given its address, as CUDA's zero-copy memory."""
    alloc = register_external(address, size)
    weakref.finalize(owner, _forget, alloc)
    return alloc


def _forget(alloc):
    with _lock:
        if _by_start.get(alloc.address) is alloc:
            del _by_start[alloc.address]
            _starts.pop(bisect.bisect_left(_starts, alloc.address))


def holds(address):
    """Whether ``address`` lies in device memory the emulator knows (an allocation, its guard pages, a module's
    variable, mapped host memory)."""
    return address in _by_start or find(address) is not None


_freed = collections.OrderedDict()   # start address -> (bytes, where it was freed): the last _FREED_KEPT
_FREED_KEPT = 4096


def release_dropped(alloc, where):
    """Release an allocation whose last reference was dropped (a finaliser's call): at once, or, where the collector
    ran the finaliser inside this module's lock on this thread, once the lock is let go (``release`` then releases
    it), so that the lock's holder is not interrupted halfway through its own change."""
    if _lock._is_owned():
        _dropped.append((alloc, where))
        return
    release(alloc, where)


def _release_dropped():
    while _dropped and not _lock._is_owned():
        alloc, where = _dropped.pop()
        if _by_start.get(alloc.address) is alloc:
            release(alloc, where)


def release(alloc, where=None):
    """Release an allocation (its mapping may be kept, inaccessible, for reuse).  Releasing twice is a
    LogicError, as in CUDA. ``where``: how and where it was freed, in words, for a later error to name."""
    try:
        _release(alloc, where)
    finally:
        if _dropped:
            _release_dropped()


def _release(alloc, where):
    with _lock:
        if _by_start.get(alloc.address) is not alloc:
            raise LogicError(f"cuMemFree failed: 0x{alloc.address:x} was already freed")
        del _by_start[alloc.address]
        _starts.pop(bisect.bisect_left(_starts, alloc.address))
        _freed.pop(alloc.address, None)
        _freed[alloc.address] = (alloc.size, where)
        if len(_freed) > _FREED_KEPT:
            _freed.popitem(last=False)
    if alloc._slot is not None:
        _release_slot(*alloc._slot)
        return
    # The mmap object holds an exported buffer (from_buffer); drop our view first.
    m = alloc._map
    alloc._map = None
    if m is None or _keep(m, alloc._map_base):
        return
    with _lock:     # its addresses go back to the system, which may hand them to host memory: forget them
        _freed.pop(alloc.address, None)
    try:
        m.close()
    except BufferError:
        # A ctypes view still references the buffer; the pages go when it does.
        pass


def _release_slot(start, size):
    """Make a slot's pages inaccessible again (a kernel using the freed pointer faults) and free for reuse;
    their memory is kept for a later allocation of the same size while under _KEEP_LIMIT, else returned."""
    global _resident_bytes
    pages = size - GAP
    _protect(start + GAP, pages, _PROT_NONE)
    with _lock:
        keep = _resident_bytes + pages <= _KEEP_LIMIT
        if keep:
            _resident_bytes += pages
    if not keep:
        _libc.madvise(start + GAP, pages, _MADV_DONTNEED)   # zero pages on the next touch
    with _lock:
        _free_slots.setdefault(size, []).append((start, keep))


def find(address):
    """The live allocation that holds ``address`` (or whose guard page does), else None.

    Returns ``(allocation, offset)``; offset may be negative or past the end when
    the address lies in a guard page, which is what fault reports need.
    """
    with _lock:
        i = bisect.bisect_right(_starts, address) - 1
        candidates = []
        if i >= 0:
            candidates.append(_by_start[_starts[i]])
        if i + 1 < len(_starts):
            candidates.append(_by_start[_starts[i + 1]])
    best = None
    for alloc in candidates:
        if alloc._map_end is None:          # a module's variable: its bytes only
            lo, hi = alloc.address, alloc.address + alloc.size
        else:
            lo, hi = alloc._map_base, alloc._map_end
        if lo <= address < hi:
            # In the gap between two buffers: the nearer one's
            distance = alloc.address - address if address < alloc.address else max(0, address - alloc.address - alloc.size)
            if best is None or distance < best[0]:
                best = (distance, alloc)
    return None if best is None else (best[1], address - best[1].address)


def freed(address):
    """``(bytes, offset, where)`` of the most recently freed allocation whose bytes held ``address`` and that
    no live allocation holds now; else None. What an error about a stale pointer names."""
    with _lock:
        for start, (size, where) in reversed(_freed.items()):
            if start <= address < start + max(size, 1):
                return size, address - start, where
    return None


#: Addresses below this are never memory (Linux's vm.mmap_min_addr is 4096 to 65536): a pointer there is a
#: null pointer plus an offset, or a small integer passed where a pointer goes.
FIRST_PAGES = 65536


def describe_invalid(address):
    """Why ``address``, in no live allocation, is not device memory: null page, freed (where), or other."""
    if address < FIRST_PAGES:
        return (f"0x{address:x} is in the first {FIRST_PAGES // 1024} KiB of the address space, where nothing is "
                f"ever mapped: a null pointer (plus an offset), or a small integer given where a pointer goes "
                f"(arguments in the wrong order?)")
    if (found := freed(address)) is not None:
        size, offset, where = found
        return (f"0x{address:x} is {offset} bytes into a {size}-byte allocation that was freed"
                f"{' ' + where if where else ''}: a pointer kept after its memory was freed")
    return None


def live_bytes():
    """Bytes asked for by the allocations that are still live."""
    with _lock:
        return sum(a.size for a in _by_start.values())


def host_memory_info():
    """``(free, total)`` bytes of host memory, which is the emulated device's memory (within this process's
    address-space limit, if it has one)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    free = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    free = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if free is None:
        free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    # A limit on this process's address space (ulimit -v) bounds what it can map, as a GPU's size bounds
    # what cuMemAlloc can give: report the smaller, so code that sizes its buffers from mem_get_info fits.
    limit = _address_space_limit()
    if limit is not None:
        total = min(total, limit)
        free = max(0, min(free, limit - _mapped_bytes()))
    return free, total


def _mapped_bytes():
    """This process's address space in use (VmSize), 0 where /proc does not say."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
