"""Inline PTX in the emulator: each supported instruction against the PTX ISA's definition (fragment layouts
written out here from the ISA's figures, independently of the emulator's), cp.async's schedule (a copy lands at
the wait that covers it), and the refusals, each with its message."""
import numpy as np
import pytest

from gpuedu.emulator import compiler, driver as drv
from gpuedu.emulator._errors import CompileError, LaunchError

# One kernel per instruction form: each lane loads its registers from regs_in[lane * NI + i], runs the
# instruction and stores its results to regs_out[lane * NO + i]. The host packs the registers by the ISA's
# layouts, so a layout the emulator got wrong gives wrong numbers.
PTX_SRC = r"""
#define LANE_IO(NI, NO) unsigned lane = threadIdx.x; const unsigned* in = regs_in + lane * NI; \
                        unsigned* out = regs_out + lane * NO;

__global__ void mma_k16_f32(unsigned* regs_out, const unsigned* regs_in) {
  LANE_IO(10, 4)
  float d[4], c[4];
  for (int i = 0; i < 4; ++i) c[i] = __uint_as_float(in[6 + i]);
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%10,%11,%12,%13};\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(in[0]), "r"(in[1]), "r"(in[2]), "r"(in[3]), "r"(in[4]), "r"(in[5]),
                 "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
  for (int i = 0; i < 4; ++i) out[i] = __float_as_uint(d[i]);
}

__global__ void mma_k16_bf16(unsigned* regs_out, const unsigned* regs_in) {
  LANE_IO(10, 4)
  float acc[4];
  for (int i = 0; i < 4; ++i) acc[i] = __uint_as_float(in[6 + i]);
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
               : "r"(in[0]), "r"(in[1]), "r"(in[2]), "r"(in[3]), "r"(in[4]), "r"(in[5]));
  for (int i = 0; i < 4; ++i) out[i] = __float_as_uint(acc[i]);
}

__global__ void mma_k16_f16(unsigned* regs_out, const unsigned* regs_in) {
  LANE_IO(8, 2)
  unsigned d0, d1;
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%8,%9};\n"
               : "=r"(d0), "=r"(d1)
               : "r"(in[0]), "r"(in[1]), "r"(in[2]), "r"(in[3]), "r"(in[4]), "r"(in[5]), "r"(in[6]), "r"(in[7]));
  out[0] = d0;
  out[1] = d1;
}

__global__ void mma_k8_f16(unsigned* regs_out, const unsigned* regs_in) {
  LANE_IO(7, 4)
  float d[4];
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(in[0]), "r"(in[1]), "r"(in[2]), "f"(__uint_as_float(in[3])), "f"(__uint_as_float(in[4])),
                 "f"(__uint_as_float(in[5])), "f"(__uint_as_float(in[6])));
  for (int i = 0; i < 4; ++i) out[i] = __float_as_uint(d[i]);
}

__global__ void mma_k8_tf32(unsigned* regs_out, const unsigned* regs_in) {
  LANE_IO(10, 4)
  float d[4];
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%10,%11,%12,%13};\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(in[0]), "r"(in[1]), "r"(in[2]), "r"(in[3]), "r"(in[4]), "r"(in[5]),
                 "f"(__uint_as_float(in[6])), "f"(__uint_as_float(in[7])), "f"(__uint_as_float(in[8])),
                 "f"(__uint_as_float(in[9])));
  for (int i = 0; i < 4; ++i) out[i] = __float_as_uint(d[i]);
}

// ldmatrix: 4 matrices of 8 x 8 16-bit values in shared memory, rows 16 bytes apart; lane l gives the address
// of row l % 8 of matrix l / 8 (rows[] lets the host shuffle which row each lane names).
__global__ void ldmatrix_all(unsigned* regs_out, const unsigned short* m, const int* rows) {
  __shared__ __align__(16) unsigned short tile[32][8];
  unsigned lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) tile[i / 8][i % 8] = m[i];
  __syncthreads();
  unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(&tile[rows[lane]][0]));
  unsigned* out = regs_out + lane * 14;
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(out[0]) : "r"(a));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(out[1]), "=r"(out[2]) : "r"(a));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(out[3]), "=r"(out[4]), "=r"(out[5]), "=r"(out[6]) : "r"(a));
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(out[7]) : "r"(a));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared::cta.b16 {%0, %1}, [%2];\n"
               : "=r"(out[8]), "=r"(out[9]) : "r"(a));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(out[10]), "=r"(out[11]), "=r"(out[12]), "=r"(out[13]) : "r"(a));
}

// cp.async: 128 floats per stage, stage s copied by 32 threads (16 bytes each) in group s. `wait` chooses what
// the threads wait for before they read both stages back: 0 nothing, 1 wait_group 1, 2 wait_all.
__global__ void cp_async_stages(float* out, const float* in, int wait) {
  __shared__ __align__(16) float s[2][128];
  int t = threadIdx.x;
  s[0][t] = -1.0f;
  s[1][t] = -1.0f;
  __syncthreads();
  for (int st = 0; st < 2; ++st) {
    unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(&s[st][4 * (t % 32)]));
    if (t < 32) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(in + 128 * st + 4 * t));
    asm volatile("cp.async.commit_group;\n" ::);
  }
  if (wait == 1) asm volatile("cp.async.wait_group %0;\n" :: "n"(1));
  if (wait == 2) asm volatile("cp.async.wait_all;\n" ::);
  __syncthreads();
  out[t] = s[0][t];
  out[128 + t] = s[1][t];
}

// cp.async.ca of 4 and 8 bytes, and a 16-byte copy whose source size `keep` zero-fills the rest.
__global__ void cp_async_sizes(float* out, const float* in, int keep) {
  __shared__ __align__(16) float s[16];
  int t = threadIdx.x;
  s[t] = -1.0f;
  __syncthreads();
  unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(s));
  if (t == 0) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(base), "l"(in));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" :: "r"(base + 8), "l"(in + 2));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(base + 16), "l"(in + 4), "r"(keep));
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::);
  }
  __syncthreads();
  out[t] = s[t];
}

__global__ void packing(unsigned* out, const float* in) {
  unsigned packed, tf32, lo, hi, bf;
  unsigned long long wide;
  unsigned short a = 0x3c00, b = 0xc000;      // 1.0 and -2.0 as halves
  asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(in[0]), "f"(in[1]));
  asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(bf) : "f"(in[0]), "f"(in[1]));
  asm volatile("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(tf32) : "f"(in[2]));
  out[0] = packed;
  out[1] = bf;
  out[2] = tf32;
  asm volatile("mov.b32 %0, {%1, %2};\n" : "=r"(out[3]) : "h"(a), "h"(b));
  asm volatile("mov.b32 {%0, %1}, %2;\n" : "=h"(a), "=h"(b) : "r"(0x12345678u));
  out[4] = a;
  out[5] = b;
  asm volatile("mov.b64 %0, {%1, %2};\n" : "=l"(wide) : "r"(0xaaaa0001u), "r"(0xbbbb0002u));
  asm volatile("mov.b64 {%0, %1}, %2;\n" : "=r"(lo), "=r"(hi) : "l"(wide));
  out[6] = lo;
  out[7] = hi;
  __shared__ float s[4];
  unsigned long long generic = (unsigned long long)(&s[2]), shared64;
  unsigned shared32;
  asm volatile("cvta.to.shared.u64 %0, %1;\n" : "=l"(shared64) : "l"(generic));
  unsigned long long scratch = generic;     // two instructions in one statement, the second reading the first
  asm volatile("cvta.to.shared.u64 %0, %0;\n  cvt.u32.u64 %1, %0;\n" : "+l"(scratch), "=r"(shared32));
  out[8] = (unsigned)(shared64 == (unsigned long long)__cvta_generic_to_shared(&s[2]));
  out[9] = shared32 - (unsigned)__cvta_generic_to_shared(&s[0]);
  unsigned long long back;
  asm volatile("cvta.shared.u64 %0, %1;\n" : "=l"(back) : "l"(shared64));
  out[10] = (unsigned)(__cvta_shared_to_generic(shared32) == (void*)&s[2] && back == (unsigned long long)&s[2]);
}
"""

# A kernel that reads a stage before its cp.async.wait_group (a missing wait).
MISSING_WAIT_SRC = r"""
__global__ void missing_wait(float* out, const float* in) {
  __shared__ __align__(16) float s[128];
  int t = threadIdx.x;
  unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(&s[4 * t]));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(in + 4 * t));
  asm volatile("cp.async.commit_group;\n" ::);
  __syncthreads();                    // a barrier does not wait for cp.async: the wait_group is missing
  out[t] = s[(t * 4 + 5) % 128];
}
"""


@pytest.fixture(scope="module")
def ptx_module():
    return compiler.SourceModule(PTX_SRC)


def _bits_f32(x):
    return np.asarray(x, np.float32).view(np.uint32)


def _half_bits(x):
    return np.asarray(x, np.float16).view(np.uint16).astype(np.uint32)


def _bf16_bits(x):
    return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint32)   # exact for small integers


def _pack(lo, hi):
    return (lo | (hi << 16)).astype(np.uint32)


# ---- the PTX ISA's fragment figures, written out (groupID = lane >> 2, tig = lane % 4) ---------------------
def _a_k16(lane, i):        # m16n8k16 A (.f16/.bf16), element a_i, i in 0..7
    g, t = lane >> 2, lane % 4
    row = g if i in (0, 1, 4, 5) else g + 8
    col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
    return row, col


def _b_k16(lane, i):        # m16n8k16 B, b_i, i in 0..3: (k, n)
    g, t = lane >> 2, lane % 4
    return t * 2 + (i & 1) + (8 if i >= 2 else 0), g


def _c(lane, i):            # m16n8kK C and D, c_i, i in 0..3
    g, t = lane >> 2, lane % 4
    return (g if i < 2 else g + 8), t * 2 + (i & 1)


def _a_k8(lane, i):         # m16n8k8 A (.f16), a_i, i in 0..3
    g, t = lane >> 2, lane % 4
    return (g if i < 2 else g + 8), t * 2 + (i & 1)


def _b_k8(lane, i):         # m16n8k8 B (.f16), b_i, i in 0..1
    g, t = lane >> 2, lane % 4
    return t * 2 + i, g


def _a_tf32(lane, i):       # m16n8k8 A (.tf32), a_i, i in 0..3
    g, t = lane >> 2, lane % 4
    return (g if i in (0, 2) else g + 8), (t if i < 2 else t + 4)


def _b_tf32(lane, i):       # m16n8k8 B (.tf32), b_i, i in 0..1
    g, t = lane >> 2, lane % 4
    return (t if i == 0 else t + 4), g


def _pairs(matrix, where, count, bits):
    """Each lane's registers of 16-bit pairs: element 2j in the low half of register j, 2j + 1 in the high."""
    regs = np.zeros((32, count // 2), np.uint32)
    for lane in range(32):
        for j in range(count // 2):
            lo, hi = (bits(matrix[where(lane, 2 * j + h)]) for h in (0, 1))
            regs[lane, j] = int(lo) | int(hi) << 16
    return regs


def _singles(matrix, where, count, bits):
    return np.array([[bits(matrix[where(lane, i)]) for i in range(count)] for lane in range(32)], np.uint32)


def _run(module, name, regs_in, n_out):
    out = np.zeros((32, n_out), np.uint32)
    module.get_function(name)(drv.Out(out), drv.In(np.ascontiguousarray(regs_in, np.uint32)), block=(32, 1, 1))
    return out


def _unpack_c(out, where, f16=False):
    d = np.zeros((16, 8), np.float64)
    for lane in range(32):
        for i in range(4):
            if f16:
                bits = (int(out[lane, i // 2]) >> (16 * (i % 2))) & 0xFFFF
                d[where(lane, i)] = float(np.uint16(bits).view(np.float16))
            else:
                d[where(lane, i)] = float(np.uint32(out[lane, i]).view(np.float32))
    return d


def _small(shape, seed):
    return np.random.default_rng(seed).integers(-4, 5, shape).astype(np.float64)


def test_mma_m16n8k16_f16_inputs_f32_sums_follow_the_fragment_layout(ptx_module):
    a, b, c = _small((16, 16), 1), _small((16, 8), 2), _small((16, 8), 3)
    half = lambda v: int(_half_bits(v))  # noqa: E731
    regs = np.hstack([_pairs(a, _a_k16, 8, half), _pairs(b, _b_k16, 4, half),
                      _singles(c, _c, 4, lambda v: int(_bits_f32(v)))])
    d = _unpack_c(_run(ptx_module, "mma_k16_f32", regs, 4), _c)
    np.testing.assert_array_equal(d, a @ b + c)


def test_mma_m16n8k16_bf16_accumulates_in_place(ptx_module):
    a, b, c = _small((16, 16), 4), _small((16, 8), 5), _small((16, 8), 6)
    bf = lambda v: int(_bf16_bits(v))  # noqa: E731
    regs = np.hstack([_pairs(a, _a_k16, 8, bf), _pairs(b, _b_k16, 4, bf),
                      _singles(c, _c, 4, lambda v: int(_bits_f32(v)))])
    d = _unpack_c(_run(ptx_module, "mma_k16_bf16", regs, 4), _c)
    np.testing.assert_array_equal(d, a @ b + c)


def test_mma_m16n8k16_with_f16_accumulators(ptx_module):
    a, b, c = _small((16, 16), 7), _small((16, 8), 8), _small((16, 8), 9)
    half = lambda v: int(_half_bits(v))  # noqa: E731
    regs = np.hstack([_pairs(a, _a_k16, 8, half), _pairs(b, _b_k16, 4, half), _pairs(c, _c, 4, half)])
    d = _unpack_c(_run(ptx_module, "mma_k16_f16", regs, 2), _c, f16=True)
    np.testing.assert_array_equal(d, a @ b + c)


def test_mma_m16n8k8_f16(ptx_module):
    a, b, c = _small((16, 8), 10), _small((8, 8), 11), _small((16, 8), 12)
    half = lambda v: int(_half_bits(v))  # noqa: E731
    regs = np.hstack([_pairs(a, _a_k8, 4, half), _pairs(b, _b_k8, 2, half),
                      _singles(c, _c, 4, lambda v: int(_bits_f32(v)))])
    d = _unpack_c(_run(ptx_module, "mma_k8_f16", regs, 4), _c)
    np.testing.assert_array_equal(d, a @ b + c)


def test_mma_m16n8k8_tf32_reads_the_top_19_bits_of_each_operand(ptx_module):
    a, b, c = _small((16, 8), 13), _small((8, 8), 14), _small((16, 8), 15)
    # low mantissa bits the tensor cores ignore: set them, the product must not change
    noisy = lambda v: int(_bits_f32(v)) | (0x1FFF if v != 0 else 0)  # noqa: E731
    regs = np.hstack([_singles(a, _a_tf32, 4, noisy), _singles(b, _b_tf32, 2, noisy),
                      _singles(c, _c, 4, lambda v: int(_bits_f32(v)))])
    d = _unpack_c(_run(ptx_module, "mma_k8_tf32", regs, 4), _c)
    np.testing.assert_array_equal(d, a @ b + c)


def test_a_wrong_fragment_layout_gives_wrong_numbers(ptx_module):
    """A kernel that packs A as if a_2 and a_4 (rows and columns) were swapped gets another product."""
    a, b, c = _small((16, 16), 16), _small((16, 8), 17), np.zeros((16, 8))
    half = lambda v: int(_half_bits(v))  # noqa: E731
    wrong = lambda lane, i: _a_k16(lane, {2: 4, 3: 5, 4: 2, 5: 3}.get(i, i))  # noqa: E731
    regs = np.hstack([_pairs(a, wrong, 8, half), _pairs(b, _b_k16, 4, half), _singles(c, _c, 4, lambda v: 0)])
    d = _unpack_c(_run(ptx_module, "mma_k16_f32", regs, 4), _c)
    assert not np.array_equal(d, a @ b)


@pytest.mark.parametrize("shuffled", [False, True])
def test_ldmatrix_gives_each_lane_its_rows_and_the_transpose(ptx_module, shuffled):
    m = np.arange(256, dtype=np.uint16).reshape(32, 8) * 7 + 3
    rows = np.arange(32, dtype=np.int32)
    if shuffled:                                      # any row address per lane: the lanes' own rows
        rows = np.random.default_rng(0).permutation(32).astype(np.int32)
    out = np.zeros((32, 14), np.uint32)
    ptx_module.get_function("ldmatrix_all")(drv.Out(out), drv.In(m.ravel()), drv.In(rows), block=(32, 1, 1))
    matrices = [m[rows[8 * j:8 * j + 8]] for j in range(4)]   # matrix j: the rows lanes 8j..8j+7 named

    def want(j, lane, trans):
        mat = matrices[j].T if trans else matrices[j]
        return int(mat[lane // 4, 2 * (lane % 4)]) | int(mat[lane // 4, 2 * (lane % 4) + 1]) << 16
    for lane in range(32):
        got = [int(v) for v in out[lane]]
        assert got[0] == want(0, lane, False)
        assert got[1:3] == [want(j, lane, False) for j in range(2)]
        assert got[3:7] == [want(j, lane, False) for j in range(4)]
        assert got[7] == want(0, lane, True)
        assert got[8:10] == [want(j, lane, True) for j in range(2)]
        assert got[10:14] == [want(j, lane, True) for j in range(4)]


def test_cp_async_lands_at_the_wait_that_covers_its_group(ptx_module):
    f = ptx_module.get_function("cp_async_stages")
    x = np.arange(256, dtype=np.float32)
    got = {}
    for wait in (0, 1, 2):
        out = np.zeros(256, np.float32)
        f(drv.Out(out), drv.In(x), np.int32(wait), block=(128, 1, 1))
        got[wait] = out
    np.testing.assert_array_equal(got[0], -1.0)                # nothing waited for: neither stage landed
    np.testing.assert_array_equal(got[1][:128], x[:128])       # wait_group 1: the older group only
    np.testing.assert_array_equal(got[1][128:], -1.0)
    np.testing.assert_array_equal(got[2], x)                   # wait_all: both


@pytest.mark.parametrize("keep", [16, 8, 0])
def test_cp_async_sizes_and_the_zero_filling_source_size(ptx_module, keep):
    x = np.arange(1, 9, dtype=np.float32)
    out = np.zeros(16, np.float32)
    ptx_module.get_function("cp_async_sizes")(drv.Out(out), drv.In(x), np.int32(keep), block=(16, 1, 1))
    np.testing.assert_array_equal(out[:1], x[:1])              # 4 bytes
    np.testing.assert_array_equal(out[1], -1.0)
    np.testing.assert_array_equal(out[2:4], x[2:4])            # 8 bytes
    kept = keep // 4
    np.testing.assert_array_equal(out[4:4 + kept], x[4:4 + kept])
    np.testing.assert_array_equal(out[4 + kept:8], 0.0)         # past the source size: zeros
    np.testing.assert_array_equal(out[8:], -1.0)


def test_conversions_and_packing(ptx_module):
    inputs = np.array([1.5, -3.0, 1.0 + 2.0 ** -11], np.float32)   # the last a TF32 tie: away from zero
    out = np.zeros(11, np.uint32)
    ptx_module.get_function("packing")(drv.Out(out), drv.In(inputs), block=(1, 1, 1))
    assert out[0] == int(_half_bits(1.5)) << 16 | int(_half_bits(-3.0))      # a to the upper half
    assert out[1] == int(_bf16_bits(1.5)) << 16 | int(_bf16_bits(-3.0))
    assert out[2] == int(_bits_f32(1.0 + 2.0 ** -10))
    assert out[3] == 0xC0003C00
    assert list(out[4:6]) == [0x5678, 0x1234]
    assert list(out[6:8]) == [0xAAAA0001, 0xBBBB0002]
    assert list(out[8:11]) == [1, 8, 1]


def test_a_missing_wait_reads_what_was_there_before():
    mod = compiler.SourceModule(MISSING_WAIT_SRC)
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(32, np.float32)
    mod.get_function("missing_wait")(drv.Out(out), drv.In(x), block=(32, 1, 1))
    assert not np.array_equal(out, x[(np.arange(32) * 4 + 5) % 128])


def test_misaligned_and_out_of_range_addresses_stop_the_launch():
    src = r"""
    __global__ void bad(float* out, const float* in, int which) {
      __shared__ __align__(16) float s[64];
      unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(s));
      unsigned r;
      if (which == 0) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(base + 4), "l"(in));
      if (which == 1) asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r) : "r"(base + 8));
      if (which == 2) asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r) : "r"(base + 4096));
      if (which == 3) asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(base), "l"(in), "r"(8));
      out[threadIdx.x] = 0.0f;
    }"""
    mod = compiler.SourceModule(src)
    f = mod.get_function("bad")
    x = np.zeros(64, np.float32)
    messages = {0: r"ran cp\.async \(line 6\): misaligned address: a copy of 16 bytes needs both addresses aligned",
                1: r"ran ldmatrix \(line 7\): misaligned address: lane 0 gives row 0 of matrix 0",
                2: r"ran ldmatrix \(line 8\): shared address 0x1000 \(16 bytes\) is outside the block's shared memory",
                3: r"ran cp\.async \(line 9\): the source size 8 is larger than the copy's 4 bytes"}
    for which, message in messages.items():
        with pytest.raises(LaunchError, match=message):
            f(drv.Out(np.zeros(32, np.float32)), drv.In(x), np.int32(which), block=(32, 1, 1))


def test_warp_wide_instructions_need_the_whole_warp():
    src = r"""
    __global__ void partial(unsigned* out) {
      __shared__ __align__(16) unsigned short s[8][8];
      unsigned r;
      asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                   : "=r"(r) : "r"((unsigned)__cvta_generic_to_shared(&s[threadIdx.x % 8][0])));
      out[threadIdx.x] = r;
    }"""
    f = compiler.SourceModule(src).get_function("partial")
    with pytest.raises(LaunchError, match=r"ldmatrix \(line 5\) needs the 32 lanes of a warp, and warp 0 of this "
                                          r"block has 16 threads"):
        f(drv.Out(np.zeros(16, np.uint32)), block=(16, 1, 1))


REFUSALS = [
    ('asm volatile("mov.u32 %0, %%laneid;" : "=r"(r));',
     r"kernel\.cu\(3\): error: the emulator does not run the PTX instruction 'mov\.u32' with '%0, %%laneid': it reads "
     r"the cluster's special registers with mov(.|\n)*It runs these"
     r"(.|\n)*cp\.async\.commit_group(.|\n)*Write the rest in CUDA C"),
    ('asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};" :: "r"(r), "r"(r));',
     r"does not run the PTX instruction 'stmatrix\.sync\.aligned\.m8n8\.x1\.shared\.b16'"),
    ('asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.bf16.bf16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, '
     '{%8,%9};" : "=r"(r), "=r"(r) : "r"(r), "r"(r), "r"(r), "r"(r), "r"(r), "r"(r), "r"(r), "r"(r));',
     r"mma\.sync with \.bf16 inputs accumulates in \.f32 only"),
    ('asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1}, [%2];" : "=r"(r), "=r"(r) : "r"(r));',
     r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16 takes 4 registers there, got 2"),
    ('asm volatile("cp.async.cg.shared.global [%0], [%1], 8;" :: "r"(r), "l"(p));',
     r"cp\.async\.cg copies 16 bytes only \(use \.ca for 8\)"),
    ('asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" :: "r"(r), "r"(r));',
     r"the global address %1 is bound with \"r\" \(32 bits\): pass the pointer with \"l\""),
    ('asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;" : "=h"(h) : "f"(x), "f"(x));',
     r"operand %0 \(h\) is bound with \"h\", 16 bits, where the instruction takes a 32-bit register: use \"r\""),
    ('asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"'
     ' : "=f"(x), "=f"(x), "=f"(x), "=f"(x) : "r"(r), "r"(r), "r"(r));',
     r"reads %0, an output only \(\"=f\"\): make it \"\+f\" to pass its value in"),
    ('asm volatile("@p cp.async.commit_group;");', r"a predicated instruction"),
    ('asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));',
     r"register declarations and \{ \} scopes in inline PTX are not supported"),
]


@pytest.mark.parametrize("statement,message", REFUSALS, ids=[f"refusal{k}" for k in range(len(REFUSALS))])
def test_what_the_emulator_does_not_run_is_refused_before_compiling(statement, message):
    src = ("__global__ void k(float* p) {\n  unsigned r = 0; unsigned short h = 0; float x = 0.0f;\n  "
           + statement + "\n  p[0] = x + r + h;\n}\n")
    with pytest.raises(CompileError, match=message):
        compiler.SourceModule(src)


@pytest.mark.parametrize("arch,options", [("sm_75", []), (None, ["-arch=sm_75"]), (None, ["-arch", "sm_70"]),
                                          (None, ["-gencode", "arch=compute_75,code=sm_75"])])
def test_instructions_the_modules_architecture_lacks_are_refused_as_ptxas_refuses_them(arch, options):
    cp = ('__global__ void k(const float* p) { __shared__ __align__(16) float s[4]; '
          'asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" :: "r"((unsigned)__cvta_generic_to_shared(s)), '
          '"l"(p)); }')
    with pytest.raises(CompileError, match=r"cp\.async\.ca\.shared\.global needs sm_80 or later; this module is "
                                           r"built for sm_7[05]"):
        compiler.SourceModule(cp, arch=arch, options=options)


def test_sm75_keeps_what_turing_has():
    only_turing = r"""
    __global__ void turing(unsigned* out, const unsigned* in) {
      float d[4];
      asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};"
                   : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                   : "r"(in[0]), "r"(in[1]), "r"(in[2]), "f"(0.0f), "f"(0.0f), "f"(0.0f), "f"(0.0f));
      out[threadIdx.x] = __float_as_uint(d[0]);
    }"""
    mod = compiler.SourceModule(only_turing, arch="sm_75")
    out = np.zeros(32, np.uint32)
    mod.get_function("turing")(drv.Out(out), drv.In(np.zeros(3, np.uint32)), block=(32, 1, 1))
    np.testing.assert_array_equal(out, 0)
    bf16 = only_turing.replace(".f32.f16.f16.f32", ".f32.bf16.bf16.f32")
    with pytest.raises(CompileError, match=r"m16n8k8 with \.bf16 inputs needs sm_80 or later; this module is built "
                                           r"for sm_75"):
        compiler.SourceModule(bf16, arch="sm_75")


def test_an_unreadable_architecture_is_said():
    with pytest.raises(CompileError, match=r"cannot read an architecture from 'volta': write it as sm_80"):
        compiler.SourceModule("__global__ void k() {}", arch="volta")


def test_asm_in_a_macro_and_a_compiler_barrier_are_kept_in_place():
    src = r"""
    #define COMMIT() asm volatile("cp.async.commit_group;\n" ::)
    #define WAIT(n) asm volatile("cp.async.wait_group %0;\n" :: "n"(n))
    __global__ void k(float* out, const float* in) {
      __shared__ __align__(16) float s[4];
      asm volatile("" ::: "memory");
      asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n"
                   :: "r"((unsigned)__cvta_generic_to_shared(s)), "l"(in));
      COMMIT();
      WAIT(0);
      out[threadIdx.x] = s[threadIdx.x] + __LINE__;
    }"""
    mod = compiler.SourceModule(src)
    out = np.zeros(4, np.float32)
    mod.get_function("k")(drv.Out(out), drv.In(np.arange(4, dtype=np.float32)), block=(4, 1, 1))
    np.testing.assert_array_equal(out, np.arange(4) + 11)   # the lines stay where they were


def test_the_architecture_is_read_with_its_specific_suffix():
    from gpuedu.emulator import _ptx
    assert _ptx.architecture() == 80 and not _ptx.architecture().specific
    assert _ptx.architecture("sm_90a") == 90 and _ptx.architecture("sm_90a").specific
    assert str(_ptx.architecture(options=["-gencode", "arch=compute_90a,code=sm_90a"])) == "sm_90a"
    assert str(_ptx.architecture(options=["-arch=sm_90"])) == "sm_90"


ARCH_SRC = r"""
__global__ void arch_macros(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    out[0] = __CUDA_ARCH__ + 1;
#else
    out[0] = __CUDA_ARCH__;
#endif
}
"""


@pytest.mark.parametrize("arch,seen", [(None, 800), ("sm_80", 800), ("sm_86", 860), ("sm_90", 900), ("sm_90a", 901)])
def test_a_module_sees_the_architecture_it_is_built_for_as_nvcc_defines_it(arch, seen):
    # __CUDA_ARCH__ of the target, and __CUDA_ARCH_FEAT_SM90_ALL for sm_90a alone: the guards kernels put around
    # Hopper's instructions take the same branch here as under nvcc
    out = np.zeros(1, np.int32)
    compiler.SourceModule(ARCH_SRC, arch=arch).get_function("arch_macros")(drv.Out(out), block=(1, 1, 1))
    assert out[0] == seen
