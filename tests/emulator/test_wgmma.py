"""Hopper's warpgroup MMA (wgmma, sm_90a) in the emulator, against the PTX ISA written out here independently of
the emulator's code: the shared-memory layouts from the ISA's table of canonical layouts (CuTe layouts, parsed from
the table's own text and checked against the ISA's worked examples) with its swizzles, the descriptor's bit fields
from its "Matrix Descriptor Format", the register fragments of .m64nNk16 (D: each warp 16 rows, mma.m16n8k16's C
layout for each 8 columns; A in registers: mma.m16n8k16's A in each warp's 16 rows). Every test kernel is valid
CUDA for sm_90a (test_compile_nvcc.py compiles them with nvcc)."""
import re

import numpy as np
import pytest

from gpuedu.emulator import compiler, driver as drv
from gpuedu.emulator._errors import CompileError, LaunchError

T = 8                      # 16-bit elements in a 128-bit unit (the ISA's T = 128 / element bits)
SHAPES = tuple(range(8, 257, 8))

# ---- the PTX ISA's shared-memory layouts, as its tables give them ----------------------------------------------
#: "Canonical Layouts" (in elements): (major-ness, swizzling mode) -> the CuTe layout the table writes.
CANONICAL = {
    ("MN", "none"): "((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))",
    ("MN", "32B"): "((T,2,m),(8,k)):((1,T,LBO),(2T,SBO))",
    ("MN", "64B"): "((T,4,m),(8,k)):((1,T,LBO),(4T,SBO))",
    ("MN", "128B"): "((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))",
    ("K", "none"): "((8,m),(T,2k)):((1T,SBO),(1,LBO))",
    ("K", "32B"): "((8,m),(T,2k)):((2T,SBO),(1,T))",
    ("K", "64B"): "((8,m),(T,2k)):((4T,SBO),(1,T))",
    ("K", "128B"): "((8,m),(T,2k)):((8T,SBO),(1,T))",
}
#: The swizzle on each: CuTe's Swizzle<B, 4, 3>, B by mode (the table's last column).
SWIZZLE_B = {"none": 0, "32B": 1, "64B": 2, "128B": 3}
#: "Matrix Descriptor Format", bits 62-63: 0 no swizzle, 1 128-byte, 2 64-byte, 3 32-byte.
DESCRIPTOR_MODE = {"none": 0, "128B": 1, "64B": 2, "32B": 3}
#: Where each mode's repeating pattern starts (the table under the descriptor format).
PATTERN_BYTES = {"128B": 1024, "64B": 512, "32B": 256}
MODES = ("none", "32B", "64B", "128B")


def _layout(text, **values):
    """A CuTe layout of the ISA's text, "(shape):(stride)", its symbols given (T, m, k, LBO, SBO): nested tuples."""
    shape, stride = (re.sub(r"(\d+)([A-Za-z])", r"\1*\2", part) for part in text.split(":"))
    return eval(shape, {}, values), eval(stride, {}, values)   # (the ISA's fixed strings, nothing else)


def _offset(shape, stride, index):
    """Where coordinate ``index`` of one mode of a layout lies: the index split over the mode's shape, first
    extent fastest (CuTe's colexicographic order), each part times its stride."""
    shape = shape if isinstance(shape, tuple) else (shape,)
    stride = stride if isinstance(stride, tuple) else (stride,)
    total = 0
    for extent, step in zip(shape, stride):
        total += (index % extent) * step
        index //= extent
    return total


def _swizzle(bits, offset):
    """CuTe's Swizzle<bits, 4, 3>: bits 7 .. 7 + bits - 1 of the byte offset XORed into bits 4 ..."""
    mask = ((1 << bits) - 1) << 7
    return offset ^ ((offset & mask) >> 3)


def layout_table(rows, depth, major, mode, lbo, sbo):
    """Byte offsets, from the swizzle pattern's start, of the elements of a 16-bit operand in shared memory:
    table[r, k] for row r of A (or column r of B) and k of ``depth``; ``lbo`` and ``sbo`` in bytes."""
    width = {"none": 1, "32B": 2, "64B": 4, "128B": 8}[mode]
    m = max(1, -(-rows // (8 if major == "K" else T * width)))
    k = depth // (2 * T) if major == "K" else depth // 8
    shape, stride = _layout(CANONICAL[major, mode], T=T, m=m, k=k, LBO=lbo // 2, SBO=sbo // 2)
    table = np.zeros((rows, depth), np.int64)
    for r in range(rows):
        for c in range(depth):
            elements = _offset(shape[0], stride[0], r) + _offset(shape[1], stride[1], c)
            table[r, c] = _swizzle(SWIZZLE_B[mode], 2 * elements)
    assert len(set(table.ravel().tolist())) == table.size, "a layout that puts two elements in one place"
    return table


def descriptor(start, lbo, sbo, mode, base=0):
    """The 64-bit matrix descriptor: bits 0-13 start, 16-29 leading and 32-45 stride dimension byte offsets (each
    (x & 0x3FFFF) >> 4), 49-51 the base offset, 62-63 the swizzling mode."""
    encode = lambda x: (x & 0x3FFFF) >> 4  # noqa: E731
    return encode(start) | encode(lbo) << 16 | encode(sbo) << 32 | base << 49 | DESCRIPTOR_MODE[mode] << 62


#: Offsets for each layout (bytes), by rows: LBO and SBO chosen so that the two differ, and a swap shows.
def layout_offsets(rows, major, mode):
    if major == "K":
        if mode == "none":
            return rows // 8 * 128, 128          # core matrices down the rows first, then the second k half
        return 16, 8 * 16 * {"32B": 2, "64B": 4, "128B": 8}[mode]    # LBO not used ("assumed 1")
    if mode == "none":
        return rows // 8 * 128, 128               # the next 8 k after every 8 mn
    width = {"32B": 2, "64B": 4, "128B": 8}[mode]
    atom = 8 * 16 * width
    return atom, max(1, -(-rows // (8 * width))) * atom


# ---- the register fragments of .m64nNk16 (per warpgroup thread t: warp t / 32, lane t % 32) ----------------------
def d_place(t, i):
    """Row and column of D that register i of thread t holds."""
    w, lane = t // 32, t % 32
    return 16 * w + lane // 4 + 8 * (i // 2 % 2), 8 * (i // 4) + 2 * (lane % 4) + i % 2


def a_place(t, e):
    """Row and column of A that element a_e (register e / 2, low half for even e) of thread t holds."""
    w, lane = t // 32, t % 32
    return 16 * w + lane // 4 + 8 * (e // 2 % 2), 2 * (lane % 4) + e % 2 + 8 * (e // 4)


def bits16(x, kind):
    x = np.asarray(x, np.float32)
    if kind == "f16":
        return x.astype(np.float16).view(np.uint16)
    return (x.view(np.uint32) >> 16).astype(np.uint16)      # exact for the small integers used here


def a_registers(a, kind):
    """Each thread's four A registers: a_2j in the low half of register j, a_2j+1 in the high half."""
    h = bits16(a, kind).astype(np.uint32)
    regs = np.zeros((128, 4), np.uint32)
    for t in range(128):
        for j in range(4):
            lo, hi = (h[a_place(t, 2 * j + s)] for s in (0, 1))
            regs[t, j] = lo | hi << 16
    return regs


def d_registers(d):
    n = d.shape[1]
    return np.array([[d[d_place(t, i)] for i in range(n // 2)] for t in range(128)], np.float32)


def d_matrix(regs, n):
    d = np.zeros((64, n))
    for t in range(128):
        for i in range(n // 2):
            d[d_place(t, i)] = regs[t, i]
    return d


class Image:
    """The bytes a kernel copies into shared memory (its start 1024-aligned there), with operands placed in them."""

    def __init__(self, size=40960):   # (with the 1 KiB for alignment, under 48 KiB)
        self.bytes = np.zeros(size, np.uint8)
        self.used = 0

    def place(self, values, kind, major, mode, lbo=None, sbo=None, shift=0, base=None):
        """``values`` (rows x 16: A, or B transposed) in the layout; returns its descriptor (start relative to the
        image). ``shift`` moves the swizzle pattern's start off its boundary (with ``base`` the base offset)."""
        rows, depth = values.shape
        if lbo is None:
            lbo, sbo = layout_offsets(rows, major, mode)
        table = layout_table(rows, depth, major, mode, lbo, sbo)
        start = -(-self.used // 1024) * 1024 + shift
        assert start + int(table.max()) + 2 <= self.bytes.size, "the image is too small for these operands"
        h = bits16(values, kind)
        view = self.bytes.view(np.uint8)
        for (r, c), at in np.ndenumerate(table):
            view[start + at:start + at + 2] = np.frombuffer(h[r, c].tobytes(), np.uint8)
        self.used = start + int(table.max()) + 2
        if base is None:
            base = (start >> 7) & 7 if mode != "none" and start % PATTERN_BYTES[mode] else 0
        return descriptor(start, lbo, sbo, mode, base)


# ---- the kernels --------------------------------------------------------------------------------------------
def _kernel(name, n, kind="f16", a_regs=False, scale_d="1", scale_a=1, scale_b=1, trans_a=0, trans_b=0, k_steps=1,
            before_wait=False, masked=True):
    """A kernel that copies ``image`` into shared memory, loads its accumulators (``d_in``) and A registers, issues
    wgmma.mma_async (``k_steps`` times, each step's descriptors 32 bytes further along k, two per commit group),
    waits and stores D. The descriptors' start addresses are relative to the image: the kernel adds where the image
    lies (its shared address masked to the 18 bits a descriptor holds, or, ``masked=False``, only shifted).
    ``before_wait``: D is stored before the wgmma.wait_group (a missing wait)."""
    nd = n // 2
    d_ops = ", ".join(f"%{i}" for i in range(nd))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(nd))
    if a_regs:
        a_op = "{" + ", ".join(f"%{nd + j}" for j in range(4)) + "}"
        b_op = f"%{nd + 4}"
        ins = ", ".join(f'"r"(a[{j}])' for j in range(4)) + ', "l"(db)'
        imm = f"{scale_a}, {scale_b}, {trans_b}"
        extra = nd + 5
    else:
        a_op, b_op = f"%{nd}", f"%{nd + 1}"
        ins = '"l"(da), "l"(db)'
        imm = f"{scale_a}, {scale_b}, {trans_a}, {trans_b}"
        extra = nd + 2
    if scale_d == "n0":          # scale-d through an "n" operand
        sd, ins = f"%{extra}", ins + ', "n"(0)'
    else:
        sd = scale_d
    store = f"  for (int i = 0; i < {nd}; ++i) d_out[t * {nd} + i] = d[i];\n"
    da_line = "    const unsigned long long da = descs[2 * group] + start + 2 * s;\n"
    address = "(static_cast<unsigned>(__cvta_generic_to_shared(smem))" + (" & 0x3FFFF)" if masked else ")")
    return f"""
__global__ void {name}(float* d_out, const float* d_in, const unsigned* a_regs, const unsigned char* image,
                       unsigned image_bytes, const unsigned long long* descs) {{
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const unsigned t = threadIdx.x, group = t / 128;
  const unsigned raw = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
  unsigned char* smem = smem_raw + ((1024 - (raw & 1023)) & 1023);
  for (unsigned i = t; i < image_bytes; i += blockDim.x) smem[i] = image[i];
  asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");   // the writes, before wgmma's reads
  __syncthreads();
  const unsigned long long start = {address} >> 4;
  float d[{nd}];
  for (int i = 0; i < {nd}; ++i) d[i] = d_in[t * {nd} + i];
{"  const unsigned* a = a_regs + 4 * t;" if a_regs else "  (void)a_regs;"}
  asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");
  for (int s = 0; s < {k_steps}; ++s) {{
{"" if a_regs else da_line}    const unsigned long long db = descs[2 * group + 1] + start + 2 * s;
    asm volatile("wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{kind}.{kind} "
                 "{{{d_ops}}}, {a_op}, {b_op}, {sd}, {imm};\\n"
                 : {outs}
                 : {ins});
    if (s % 2 == 1) asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
  }}
  asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
{store if before_wait else ""}  asm volatile("wgmma.wait_group.sync.aligned %0;\\n" :: "n"(1) : "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\\n" ::: "memory");
{"" if before_wait else store}}}
"""


# Every shape, A from shared memory and from registers, .f16, D += A B.
SHAPES_SRC = "".join(_kernel(f"ss_n{n}", n) + _kernel(f"rs_n{n}", n, a_regs=True) for n in SHAPES)

# .bf16, D = A B (scale-d 0: a literal, and an "n" operand), negation, transposes, a loop over k, a missing wait.
WGMMA_SRC = "".join([
    _kernel("bf16_ss_n64", 64, "bf16"), _kernel("bf16_rs_n64", 64, "bf16", a_regs=True),
    _kernel("bf16_ss_n256", 256, "bf16"),
    _kernel("f16_ss_zero", 64, scale_d="0"), _kernel("f16_rs_zero", 64, a_regs=True, scale_d="0"),
    _kernel("bf16_ss_zero", 64, "bf16", scale_d="n0"), _kernel("bf16_rs_zero", 64, "bf16", a_regs=True, scale_d="n0"),
    _kernel("f16_ss_neg_a", 64, scale_a=-1), _kernel("bf16_rs_neg_b", 64, "bf16", a_regs=True, scale_b=-1),
    _kernel("f16_ss_tn", 64, trans_a=1), _kernel("f16_ss_nt", 64, trans_b=1),
    _kernel("f16_ss_tt", 64, trans_a=1, trans_b=1),
    _kernel("f16_rs_t", 64, a_regs=True, trans_b=1), _kernel("bf16_ss_tt", 128, "bf16", trans_a=1, trans_b=1),
    _kernel("f16_ss_k64", 64, k_steps=4), _kernel("f16_ss_no_wait", 32, before_wait=True),
    _kernel("f16_ss_unmasked", 32, masked=False),
])


@pytest.fixture(scope="module")
def shapes_module():
    return compiler.SourceModule(SHAPES_SRC, arch="sm_90a")


@pytest.fixture(scope="module")
def wgmma_module():
    return compiler.SourceModule(WGMMA_SRC, arch="sm_90a")


def small(shape, seed):
    return np.random.default_rng(seed).integers(-4, 5, shape).astype(np.float64)


def run(module, name, n, image, descs, a=None, kind="f16", d0=None, threads=128):
    """D (64 x n) after the kernel, or each warpgroup's (groups x 64 x n) for 256 threads; ``descs``: the (A, B)
    descriptors of each warpgroup, ``a``: A in registers (every warpgroup's), ``d0``: D before."""
    groups = threads // 128
    d0 = np.zeros((groups, 64, n)) if d0 is None else np.broadcast_to(d0, (groups, 64, n))
    d_in = np.concatenate([d_registers(d0[g]) for g in range(groups)])
    regs = np.zeros((threads, 4), np.uint32) if a is None else np.concatenate([a_registers(a, kind)] * groups)
    out = np.zeros_like(d_in)
    module.get_function(name)(drv.Out(out), drv.In(d_in), drv.In(regs), drv.In(image.bytes),
                              np.uint32(image.bytes.size), drv.In(np.array(descs, np.uint64)),
                              block=(threads, 1, 1), shared=image.bytes.size + 1024)
    d = np.stack([d_matrix(out[128 * g:128 * g + 128], n) for g in range(groups)])
    return d[0] if groups == 1 else d


# ---- the tables themselves, against the ISA's text ------------------------------------------------------------
def test_the_canonical_layouts_give_the_isas_worked_examples():
    examples = [   # (major, mode, T, m, k, LBO, SBO in elements) -> the ISA's "Exact layout"
        (("K", "none", 4, 2, 2, 64, 32), "((8,2),(4,4)):((4,32),(1,64))"),
        (("K", "32B", 4, 2, 2, None, 64), "((8,2),(4,4)):((8,64),(1,4))"),
        (("MN", "none", 8, 2, 2, 128, 64), "((8,1,2),(8,2)):((1,8,64),(8,128))"),
        (("MN", "32B", 8, 2, 2, 128, 256), "((8,2,2),(8,2)):((1,8,128),(16,256))"),
        (("MN", "64B", 8, 2, 2, 256, 512), "((8,4,2),(8,2)):((1,8,256),(32,512))"),
    ]
    for (major, mode, t, m, k, lbo, sbo), exact in examples:
        assert _layout(CANONICAL[major, mode], T=t, m=m, k=k, LBO=lbo, SBO=sbo) == _layout(exact)
    # the encodings the ISA gives for the last example: LBO = 256 * sizeof(bf16) >> 4 = 32, SBO 64
    d = descriptor(0, 256 * 2, 512 * 2, "64B")
    assert (d >> 16 & 0x3FFF, d >> 32 & 0x3FFF, d >> 62) == (32, 64, 2)
    # each swizzle repeats where the ISA says its pattern starts, and not before
    for mode, period in PATTERN_BYTES.items():
        f = [_swizzle(SWIZZLE_B[mode], x) for x in range(2 * period)]
        half = period // 2
        assert f[period:] == [x + period for x in f[:period]] and f[half:period] != [x + half for x in f[:half]]


# ---- descriptor decoding: every swizzling mode, both major-nesses, A and B ------------------------------------
@pytest.mark.parametrize("major", ["K", "MN"])
@pytest.mark.parametrize("mode", MODES)
def test_b_descriptor_decoding_reads_each_element_where_the_isa_puts_it(shapes_module, wgmma_module, mode, major):
    """B with 1,024 distinct values, A (in registers) picking row m % 16 of B into row m of D: D's first 16 rows are
    B exactly as read, element by element, through the descriptor."""
    b = np.arange(1, 16 * 64 + 1, dtype=np.float64).reshape(16, 64)
    pick = np.array([[1.0 if k == m % 16 else 0.0 for k in range(16)] for m in range(64)])
    image = Image()
    db = image.place(b.T, "f16", major, mode)
    module, name = (shapes_module, "rs_n64") if major == "K" else (wgmma_module, "f16_rs_t")
    d = run(module, name, 64, image, [0, db], a=pick)
    np.testing.assert_array_equal(d[:16], b)
    np.testing.assert_array_equal(d, pick @ b)


@pytest.mark.parametrize("major", ["K", "MN"])
@pytest.mark.parametrize("mode", MODES)
def test_a_descriptor_decoding_reads_each_element_where_the_isa_puts_it(shapes_module, wgmma_module, mode, major):
    """A with 1,024 distinct values, B picking column n % 16 of A into column n of D."""
    a = np.arange(1, 64 * 16 + 1, dtype=np.float64).reshape(64, 16)
    pick = np.array([[1.0 if n % 16 == k else 0.0 for n in range(64)] for k in range(16)])
    image = Image()
    da = image.place(a, "f16", major, mode)
    db = image.place(pick.T, "f16", "K", "none")
    module, name = (shapes_module, "ss_n64") if major == "K" else (wgmma_module, "f16_ss_tn")
    d = run(module, name, 64, image, [da, db])
    np.testing.assert_array_equal(d[:, :16], a)
    np.testing.assert_array_equal(d, a @ pick)


# ---- products -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", SHAPES)
def test_every_shape_from_shared_memory_and_registers(shapes_module, n):
    a, b, c = small((64, 16), n), small((16, n), n + 1), small((64, n), n + 2)
    mode = MODES[n // 8 % 4]
    image = Image()
    da = image.place(a, "f16", "K", mode)
    db = image.place(b.T, "f16", "K", MODES[(n // 8 + 1) % 4])
    np.testing.assert_array_equal(run(shapes_module, f"ss_n{n}", n, image, [da, db], d0=c), a @ b + c)
    image = Image()
    db = image.place(b.T, "f16", "K", mode)
    np.testing.assert_array_equal(run(shapes_module, f"rs_n{n}", n, image, [0, db], a=a, d0=c), a @ b + c)


@pytest.mark.parametrize("name,n,kind,a_in_registers,accumulate", [
    ("bf16_ss_n64", 64, "bf16", False, True), ("bf16_rs_n64", 64, "bf16", True, True),
    ("bf16_ss_n256", 256, "bf16", False, True),
    ("f16_ss_zero", 64, "f16", False, False), ("f16_rs_zero", 64, "f16", True, False),
    ("bf16_ss_zero", 64, "bf16", False, False), ("bf16_rs_zero", 64, "bf16", True, False),
])
def test_bf16_and_scale_d(wgmma_module, name, n, kind, a_in_registers, accumulate):
    """scale-d 1: D = A B + D; scale-d 0 (a literal 0, or "n"(0)): D = A B, whatever D held."""
    a, b, c = small((64, 16), 7), small((16, n), 8), small((64, n), 9) + 100
    image = Image()
    da = 0 if a_in_registers else image.place(a, kind, "K", "128B")
    db = image.place(b.T, kind, "K", "64B")
    d = run(wgmma_module, name, n, image, [da, db], a=a if a_in_registers else None, kind=kind, d0=c)
    np.testing.assert_array_equal(d, a @ b + (c if accumulate else 0))


@pytest.mark.parametrize("name,negate_a,negate_b,a_in_registers,kind", [
    ("f16_ss_neg_a", True, False, False, "f16"), ("bf16_rs_neg_b", False, True, True, "bf16")])
def test_imm_scale_minus_one_negates(wgmma_module, name, negate_a, negate_b, a_in_registers, kind):
    a, b, c = small((64, 16), 10), small((16, 64), 11), small((64, 64), 12)
    image = Image()
    da = 0 if a_in_registers else image.place(a, kind, "K", "32B")
    db = image.place(b.T, kind, "K", "128B")
    d = run(wgmma_module, name, 64, image, [da, db], a=a if a_in_registers else None, kind=kind, d0=c)
    np.testing.assert_array_equal(d, (-a if negate_a else a) @ (-b if negate_b else b) + c)


@pytest.mark.parametrize("name,n,kind,major_a,major_b", [
    ("f16_ss_nt", 64, "f16", "K", "MN"), ("f16_ss_tt", 64, "f16", "MN", "MN"),
    ("bf16_ss_tt", 128, "bf16", "MN", "MN")])
@pytest.mark.parametrize("mode", MODES)
def test_transposed_operands_are_read_mn_major(wgmma_module, name, n, kind, major_a, major_b, mode):
    a, b, c = small((64, 16), 13), small((16, n), 14), small((64, n), 15)
    image = Image()
    da = image.place(a, kind, major_a, mode)
    db = image.place(b.T, kind, major_b, MODES[(MODES.index(mode) + 1) % 4])
    np.testing.assert_array_equal(run(wgmma_module, name, n, image, [da, db], kind=kind, d0=c), a @ b + c)


def test_a_k_loop_moves_the_start_address_through_a_swizzled_tile(wgmma_module):
    """A 64 x 64 and B 64 x 64, each one 128-byte-swizzled K-major tile (rows of 64 k): four wgmma, each 16 k
    further, its descriptors' start 32 bytes further, in two commit groups; the swizzle follows the address."""
    a, b = small((64, 64), 16), small((64, 64), 17)
    image = Image()
    lbo, sbo = layout_offsets(64, "K", "128B")
    ta, tb = (layout_table(64, 64, "K", "128B", lbo, sbo) for _ in range(2))
    for matrix, table, offset in ((a, ta, 0), (b.T, tb, 8192)):
        h = bits16(matrix, "f16")
        for (r, c), at in np.ndenumerate(table):
            image.bytes[offset + at:offset + at + 2] = np.frombuffer(h[r, c].tobytes(), np.uint8)
    descs = [descriptor(0, lbo, sbo, "128B"), descriptor(8192, lbo, sbo, "128B")]
    np.testing.assert_array_equal(run(wgmma_module, "f16_ss_k64", 64, image, descs), a @ b)


def test_the_base_offset_follows_a_pattern_that_starts_off_its_boundary(shapes_module):
    """A 128-byte-swizzled B whose pattern starts 384 bytes past a 1024-byte boundary: the base offset
    (384 >> 7) & 7 = 3 tells the descriptor so; with 0 the rows' chunks are read from the wrong places.
    (How the hardware applies the base offset is read from the ISA's definition, pattern start >> 7: the rows
    of the pattern are counted from its start.)"""
    a, b = small((64, 16), 18), small((16, 64), 19)
    image = Image()
    db = image.place(b.T, "f16", "K", "128B", shift=384)
    assert db >> 49 & 7 == 3
    np.testing.assert_array_equal(run(shapes_module, "rs_n64", 64, image, [0, db], a=a), a @ b)
    wrong = db & ~(7 << 49)
    assert not np.array_equal(run(shapes_module, "rs_n64", 64, image, [0, wrong], a=a), a @ b)


def test_two_warpgroups_each_with_their_own_operands(shapes_module):
    a, b0, b1 = small((64, 16), 20), small((16, 32), 21), small((16, 32), 22)
    image = Image()
    da, db0 = image.place(a, "f16", "K", "64B"), image.place(b0.T, "f16", "K", "none")
    db1 = image.place(b1.T, "f16", "K", "32B")
    d = run(shapes_module, "ss_n32", 32, image, [da, db0, da, db1], threads=256)
    np.testing.assert_array_equal(d[0], a @ b0)
    np.testing.assert_array_equal(d[1], a @ b1)


@pytest.mark.parametrize("change", ["swizzle", "offsets", "start"])
def test_a_wrong_descriptor_gives_wrong_numbers(shapes_module, change):
    a, b = small((64, 16), 23), small((16, 64), 24)
    image = Image()
    if change == "offsets":
        db = image.place(b.T, "f16", "K", "none")
        lbo, sbo = db >> 16 & 0x3FFF, db >> 32 & 0x3FFF
        wrong = (db & ~(0x3FFF << 16) & ~(0x3FFF << 32)) | sbo << 16 | lbo << 32   # LBO and SBO swapped
    elif change == "swizzle":
        db = image.place(b.T, "f16", "K", "128B")
        wrong = (db & ~(3 << 62)) | DESCRIPTOR_MODE["64B"] << 62
    else:
        db = image.place(b.T, "f16", "K", "32B")
        wrong = db + 2                                                       # 32 bytes further
    np.testing.assert_array_equal(run(shapes_module, "rs_n64", 64, image, [0, db], a=a), a @ b)
    assert not np.array_equal(run(shapes_module, "rs_n64", 64, image, [0, wrong], a=a), a @ b)


def test_a_descriptor_past_shared_memory_stops_the_launch(shapes_module):
    image = Image(4096)
    db = descriptor(0, 128, 0x3FFF0, "none")                   # each 8 columns 256 KiB further
    with pytest.raises(LaunchError, match=r"ran wgmma\.mma_async \(line \d+\): the descriptor of B \(0x[0-9a-f]+: "
                                          r"start 0x20000, leading byte offset 128, stride byte offset 262128, no "
                                          r"swizzle\) puts its element \(0, 8\) at shared address 0x5fff0, outside "
                                          r"the block's shared memory"):
        run(shapes_module, "rs_n64", 64, image, [0, db], a=np.zeros((64, 16)))


def test_an_address_shifted_without_its_mask_names_the_same_matrix(wgmma_module):
    """A GPU's shared addresses fit the descriptor's 18 bits, so a kernel may shift one into the start field without
    masking it; the emulator's dynamic shared memory lies where the bits above 17 fall in unused descriptor bits."""
    a, b = small((64, 16), 27), small((16, 32), 28)
    image = Image()
    da, db = image.place(a, "f16", "K", "none"), image.place(b.T, "f16", "K", "none")    # (LBO read: bits 16-29)
    np.testing.assert_array_equal(run(wgmma_module, "f16_ss_unmasked", 32, image, [da, db]), a @ b)


def test_a_missing_wait_group_is_not_seen_in_the_values(wgmma_module):
    """The product is written when mma_async is issued (gpuedu_wgmma.h): D read before the wgmma.wait_group that
    covers it is already the product here. (For this kernel ptxas, too, waits before the read: nvcc 13 for sm_90a
    says "warpgroup.wait is injected ... to allow use of registers defined by GMMA", info C7517.)"""
    a, b = small((64, 16), 25), small((16, 32), 26)
    image = Image()
    da, db = image.place(a, "f16", "K", "none"), image.place(b.T, "f16", "K", "none")
    np.testing.assert_array_equal(run(wgmma_module, "f16_ss_no_wait", 32, image, [da, db]), a @ b)


# ---- the warpgroup's meeting ----------------------------------------------------------------------------------
MEETING_SRC = r"""
// which: 0 every thread, 1 warp 3 returns first, 2 warp 2 waits at __syncthreads, 3 half the group at another
// statement, 4 thread 37 gives another B descriptor.
__global__ void meeting(float* out, unsigned long long desc, int which) {
  __shared__ __align__(1024) unsigned short tile[64 * 16];   // A (64 x 16), and B (16 x 8) in its start
  const unsigned t = threadIdx.x;
  for (unsigned i = t; i < 64 * 16; i += blockDim.x) tile[i] = 0;
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  if (which == 1 && t >= 96) return;
  if (which == 2 && t / 32 == 2) {
    __syncthreads();
    return;
  }
  const unsigned long long d0 = desc + ((static_cast<unsigned>(__cvta_generic_to_shared(tile)) & 0x3FFFF) >> 4);
  const unsigned long long db = d0 + (which == 4 && t == 37 ? 8 : 0);
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  if (which == 3 && t < 64) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, 1, 1, 1, 0, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(d0), "l"(db));
  } else {
    asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, 1, 1, 1, 0, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(d0), "l"(db));
  }
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  out[t] = d[0] + d[1] + d[2] + d[3];
}
"""


@pytest.fixture(scope="module")
def meeting():
    return compiler.SourceModule(MEETING_SRC, arch="sm_90a").get_function("meeting")


def test_the_whole_warpgroup_meets(meeting):
    out = np.full(128, -1.0, np.float32)
    meeting(drv.Out(out), np.uint64(descriptor(0, 128, 256, "none")), np.int32(0), block=(128, 1, 1))
    np.testing.assert_array_equal(out, 0.0)


@pytest.mark.parametrize("which,threads,message", [
    (0, 96, r"wgmma\.mma_async \(line 23\) needs the 128 threads of a warpgroup \(four consecutive warps, the first "
            r"a multiple of 4\), and warpgroup 0 of this block has 96 threads: make the block's size a multiple of "
            r"128"),
    (0, 160, r"and warpgroup 1 of this block has 32 threads"),
    (1, 128, r"wgmma\.mma_async \(line 23\) needs the 128 threads of warpgroup 0 \(threads 0 to 127\) and 96 came: "
             r"thread \(96,0,0\) has exited\. Every thread of a warpgroup must reach the same wgmma\.mma_async"),
    (2, 128, r"and 96 came: thread \(64,0,0\) waits at __syncthreads"),
    (3, 128, r"the threads of warpgroup 0 meet at different wgmma\.mma_async instructions: thread \d+ at line "
             r"(?:20|23) \(m64n8k16, A in shared memory, scale-d 1\), thread \d+ at line (?:20|23)"),
    (4, 128, r"the threads of warpgroup 0 give different descriptors of B: thread 0 0x[0-9a-f]+, thread 37 "
             r"0x[0-9a-f]+; a matrix descriptor must be the same in every warp of the warpgroup"),
])
def test_a_warpgroup_whose_threads_do_not_all_meet_is_reported(meeting, which, threads, message):
    with pytest.raises(LaunchError, match=message):
        meeting(drv.Out(np.zeros(threads, np.float32)), np.uint64(descriptor(0, 128, 256, "none")), np.int32(which),
                block=(threads, 1, 1))


# ---- what is refused before compiling -----------------------------------------------------------------------
def _statement(body, arch="sm_90a"):
    src = ("__global__ void k(float* p, unsigned long long da, unsigned long long db, unsigned r, int s) {\n"
           "  float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;\n  " + body + "\n  p[0] = d0 + d1 + d2 + d3;\n}\n")
    return compiler.SourceModule(src, arch=arch)


MMA = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}"
ACC = '"+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)'
REFUSALS = [
    (f'asm volatile("{MMA}, %4, %5, 1, 1, 1, 0, 0;" : {ACC} : "l"(da), "l"(db));', "sm_90",
     r"wgmma\.mma_async\.sync\.aligned\.m64n8k16\.f32\.f16\.f16 needs the architecture-specific target sm_90a; this "
     r"module is built for sm_90, where ptxas refuses it \(\"Instruction 'wgmma\.mma_async with floating point types' "
     r"not supported on \.target 'sm_90'\"\): build with arch='sm_90a'"),
    ('asm volatile("wgmma.fence.sync.aligned;" ::: "memory");', "sm_80",
     r"wgmma\.fence\.sync\.aligned needs the architecture-specific target sm_90a; this module is built for sm_80, "
     r"where ptxas refuses it \(\"Instruction 'wgmma\.fence' not supported on \.target 'sm_80'\"\)"),
    ('asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");', "sm_90",
     r"\"Instruction 'wgmma\.commit_group' not supported on \.target 'sm_90'\""),
    ('asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");', "sm_80",
     r"\"Instruction 'wgmma\.wait_group' not supported on \.target 'sm_80'\""),
    ('asm volatile("fence.proxy.async.shared::cta;" ::: "memory");', "sm_80",
     r"fence\.proxy\.async\.shared::cta needs sm_90 or later; this module is built for sm_80"),
    (f'asm volatile("{MMA.replace(".f32.f16.f16", ".f16.f16.f16")}, %4, %5, 1, 1, 1, 0, 0;" : {ACC} : "l"(da), '
     f'"l"(db));', "sm_90a",
     r"the emulator runs wgmma\.mma_async \.m64nNk16 with \.f32 accumulators and \.f16 or \.bf16 inputs "
     r"\(\.f32\.f16\.f16, \.f32\.bf16\.bf16\); k16\.f16\.f16\.f16 is not one of them"),
    (f'asm volatile("{MMA.replace("m64n8k16", "m64n12k16")}, %4, %5, 1, 1, 1, 0, 0;" : {ACC} : "l"(da), "l"(db));',
     "sm_90a", r"N is 12; wgmma's shapes are m64nNk16 with N a multiple of 8 from 8 to 256"),
    (f'asm volatile("{MMA}, %4, %5, 2, 1, 1, 0, 0;" : {ACC} : "l"(da), "l"(db));', "sm_90a",
     r"scale-d is 2; ptxas refuses it \(\"Argument 3 of instruction 'wgmma\.mma_async with floating point types': "
     r"unexpected value '2', expected to be 0 or 1\"\)"),
    (f'asm volatile("{MMA}, %4, %5, 1, 0, 1, 0, 0;" : {ACC} : "l"(da), "l"(db));', "sm_90a",
     r"imm-scale-a is 0; ptxas refuses it \(\"Argument 4 .*expected to be -1 or 1\"\)"),
    (f'asm volatile("{MMA}, %4, %5, 1, 1, 1, 2, 0;" : {ACC} : "l"(da), "l"(db));', "sm_90a",
     r"imm-trans-a is 2; ptxas refuses it \(\"Argument 6 .*expected to be 0 or 1\"\)"),
    (f'asm volatile("{MMA}, %4, %5, %6, 1, 1, 0, 0;" : {ACC} : "l"(da), "l"(db), "r"(s));', "sm_90a",
     r"scale-d \(%6, s\) is bound with \"r\", a register, where ptxas takes an immediate \(\"Arguments mismatch for "
     r"instruction 'wgmma\.mma_async'\"\).*set a predicate from a register inside the statement, as public kernels "
     r"do"),
    (f'asm volatile("{MMA}, %4, %5, p, 1, 1, 0, 0;" : {ACC} : "l"(da), "l"(db));', "sm_90a",
     r"scale-d 'p' is not an immediate the emulator takes.*scale-d is a predicate: 1 accumulates"),
    (f'asm volatile("{MMA}, %4, %5, 1, 1, 1, 0;" : {ACC} : "l"(da), "l"(db));', "sm_90a",
     r"takes 8 operands with A in shared memory .* or 7 with A in registers .*got 7 \(ptxas: \"Arguments mismatch"),
    (f'asm volatile("{MMA}, %4, %5, 1, 1, 1, 0, 0;" : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3) : "l"(da), "l"(db));',
     "sm_90a", r"reads %0, an output only \(\"=f\"\): make it \"\+f\" to pass its value in"),
    (f'asm volatile("{MMA}, %4, %5, 1, 1, 1, 0, 0;" : {ACC} : "r"(r), "l"(db));', "sm_90a",
     r"operand %4 \(r\) is bound with \"r\", 32 bits, where the instruction takes a 64-bit register: use \"l\""),
    (f'asm volatile("{MMA}, {{%4, %5, %6}}, %7, 1, 1, 1, 0;" : {ACC} : "r"(r), "r"(r), "r"(r), "l"(db));', "sm_90a",
     r"takes 4 registers there, got 3"),
    ('asm volatile("wgmma.wait_group.sync.aligned -1;" ::: "memory");', "sm_90a",
     r"N is -1; ptxas refuses it \(\"Argument 0 of instruction 'wgmma\.wait_group': unexpected value '-1', expected "
     r"to be non-negative integer\"\)"),
    ('asm volatile("wgmma.wait_group.sync.aligned %0;" :: "r"(r) : "memory");', "sm_90a",
     r"N \(%0, r\) is bound with \"r\", a register, where ptxas takes an immediate"),
    ('asm volatile("wgmma.fence.sync.aligned %0;" :: "r"(r));', "sm_90a",
     r"wgmma\.fence\.sync\.aligned takes no operands, got %0"),
]


@pytest.mark.parametrize("statement,arch,message", REFUSALS, ids=[f"refusal{k}" for k in range(len(REFUSALS))])
def test_what_the_emulator_does_not_run_is_refused_with_ptxas_reason(statement, arch, message):
    with pytest.raises(CompileError, match=message):
        _statement(statement, arch)



# ---- immediates nvcc knows and the rewrite does not: template parameters; the scale-d predicate idiom ------------
TEMPLATE_SRC = r"""
__device__ inline unsigned smem(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

// D (64 x 8) = A (64 x 16) B (16 x 8), plus D when `accumulate` is not 0, D starting at `start`: A K-major, B K-major
// (TRANS_B 0) or N-major (1), no swizzle; the wait's count and setmaxnreg's from template parameters, as public
// kernels write them, and scale-d a predicate set from a register inside the statement.
template <int TRANS_B, int WAIT, int REGS>
__device__ void mma_tile(const unsigned short* a, const unsigned short* b, float* d, int accumulate, float start)
{
    __shared__ __align__(128) unsigned short sa[64 * 16];
    __shared__ __align__(128) unsigned short sb[16 * 8];
    for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) {
        const int m = i / 16, k = i % 16;
        sa[((m / 8) * 2 + k / 8) * 64 + (m % 8) * 8 + k % 8] = a[i];   // core matrices: 8 rows, 16 bytes each
    }
    for (int i = threadIdx.x; i < 16 * 8; i += blockDim.x) {
        const int k = i / 8, n = i % 8;
        sb[TRANS_B ? (k / 8) * 64 + (k % 8) * 8 + n : (k / 8) * 64 + n * 8 + k % 8] = b[i];
    }
    __syncthreads();
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(REGS));
    const unsigned long long da = ((smem(sa) & 0x3FFFF) >> 4) | ((128ull >> 4) << 16) | ((256ull >> 4) << 32);
    const unsigned long long db = ((smem(sb) & 0x3FFFF) >> 4) | ((128ull >> 4) << 16) | ((128ull >> 4) << 32);
    float d0 = start, d1 = start, d2 = start, d3 = start;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, %7;\n}\n"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(da), "l"(db), "r"(accumulate), "n"(TRANS_B));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(WAIT) : "memory");
    const unsigned w = threadIdx.x / 32, l = threadIdx.x % 32;
    const float v[4] = {d0, d1, d2, d3};
    for (int j = 0; j < 4; ++j) d[(16 * w + l / 4 + 8 * (j / 2)) * 8 + 2 * (l % 4) + j % 2] = v[j];
}

extern "C" __global__ void mma_k_major(const unsigned short* a, const unsigned short* b, float* d, int accumulate,
                                       float start)
{ mma_tile<0, 0, 240>(a, b, d, accumulate, start); }
extern "C" __global__ void mma_n_major(const unsigned short* a, const unsigned short* b, float* d, int accumulate, float start)
{ mma_tile<1, 1, 232>(a, b, d, accumulate, start); }
"""


@pytest.fixture(scope="module")
def template_module():
    return compiler.SourceModule(TEMPLATE_SRC, arch="sm_90a", no_extern_c=True)   # (templates: C++ linkage)


@pytest.mark.parametrize("kernel", ["mma_k_major", "mma_n_major"])
@pytest.mark.parametrize("accumulate", [0, 1])
def test_template_immediates_and_a_predicate_scale_d_run_as_their_instance_says(template_module, kernel, accumulate):
    rng = np.random.default_rng(4)
    a = rng.integers(-3, 4, (64, 16)).astype(np.float16)
    b = rng.integers(-3, 4, (16, 8)).astype(np.float16)
    d = np.zeros((64, 8), np.float32)
    template_module.get_function(kernel)(drv.In(a.view(np.uint16)), drv.In(b.view(np.uint16)), drv.Out(d),
                                         np.int32(accumulate), np.float32(0.5), block=(128, 1, 1))
    want = a.astype(np.float32) @ b.astype(np.float32) + (0.5 if accumulate else 0.0)
    np.testing.assert_array_equal(d, want)


@pytest.mark.parametrize("body,message", [
    ("mma_tile<2, 0, 240>", r"ran wgmma\.mma_async \(line \d+\): imm-trans-b is 2; ptxas takes 0 or 1 there"),
    ("mma_tile<0, 0, 20>", r"ran setmaxnreg \(line \d+\): the register count 20 must be from 24 to 256 and a multiple "
                           r"of 8"),
    ("mma_tile<0, -1, 240>", r"ran wgmma\.wait_group \(line \d+\): N is -1; ptxas takes a non-negative integer"),
])
def test_a_template_instance_ptxas_would_refuse_stops_the_launch(body, message):
    # (ptxas refuses such an instance when it compiles it; the emulator reads the value when the instruction runs)
    src = TEMPLATE_SRC.split('extern "C" __global__ void mma_k_major')[0] + (
        "extern \"C\" __global__ void bad(const unsigned short* a, const unsigned short* b, float* d)\n{ " + body
        + "(a, b, d, 0, 0.0f); }\n")
    f = compiler.SourceModule(src, arch="sm_90a", no_extern_c=True).get_function("bad")
    with pytest.raises(LaunchError, match=message):
        f(drv.In(np.zeros(64 * 16, np.uint16)), drv.In(np.zeros(16 * 8, np.uint16)), drv.Out(np.zeros(512, np.float32)),
          block=(128, 1, 1))
