"""Exercises of lessons/14_attention.ipynb: a fused attention kernel in FP16 that keeps the N x N scores out of
global memory (the profiler counts its stores), and the bytes each version of the lesson's ladder stores."""
import numpy as np

from . import Case, Exercise, FunctionExercise, Requirement, ceil_div, register
from ._exercise import global_writes

HEAD = 16                  # the head size the exercise compiles in (#define D 16)
ROWS = 64                  # threads a block: one query row each
STORE_SECTORS = global_writes("sectors")   # stores (local ones too), and atomics and reductions, which write too


def fused_attention_spec(Q, K, V, scratch, N, scale, causal):
    """O = softmax(mask(scale Q K^T)) V for one head, Q, K, V [N, 16] float16, in float64, rounded to
    float16 once; scratch is not part of the result."""
    q, k, v = (x.astype(np.float64).reshape(int(N), HEAD) for x in (Q, K, V))
    s = float(scale) * q @ k.T
    if causal:
        s = np.where(np.tril(np.ones(s.shape, bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True) @ v).astype(np.float16)


def fused_attention_cases(rng):
    for label, n, causal, spread in [("N = 1", 1, 0, 1.0), ("N = 5, causal", 5, 1, 1.0),
                                     (f"N = {ROWS} (one block)", ROWS, 0, 1.0),
                                     (f"N = {ROWS + 1}, causal (a second block of one row)", ROWS + 1, 1, 1.0),
                                     ("N = 200, large scores (exp overflows without the running max)", 200, 0, 6.0),
                                     ("N = 300, causal", 300, 1, 2.0)]:
        q, k, v = (rng.standard_normal((n, HEAD)) * (spread if name != "v" else 1.0)
                   for name in ("q", "k", "v"))
        yield Case(label, {"Q": q.astype(np.float16), "K": k.astype(np.float16), "V": v.astype(np.float16),
                           "scratch": np.zeros(n * n, np.float32), "N": np.int32(n),
                           "scale": np.float32(1.0 / np.sqrt(HEAD)), "causal": np.int32(causal)},
                   block=(ROWS, 1, 1), grid=(ceil_div(n, ROWS), 1))


def output_sectors(case):
    """The most sectors storing O may take: its N rows of 16 halves are 32 bytes each, one sector a row once
    coalesced, and a thread that writes its own row as two 16-byte vectors (the stated slack) touches that sector
    with each of its two stores: 2 N. Half by half, a row's 16 stores would touch it 16 times."""
    return 2 * int(case.inputs["N"])


def _stores_hint(case, got, limit, metrics):
    n = int(case.inputs["N"])
    stores = sum(metrics.get(name, 0) for name in ("smsp__sass_inst_executed_op_global_st.sum",))
    warps = max(1, ceil_div(n, 32))
    if got <= n * HEAD and stores >= 8 * warps:
        return (f"your kernel stored {got:,} sectors of 32 bytes to global memory where O takes at most {limit:,}: "
                f"{stores // warps} store instructions a warp, so each thread writes its row of O half by half, and "
                f"each store touches a sector per lane, 16 times a row. Round the row to __half into registers, then "
                f"write its 32 bytes as two 16-byte vectors: union {{ uint4 v[2]; __half2 h[8]; }} row; "
                f"row.h[c / 2] = __floats2half2_rn(o[c] / l, o[c + 1] / l); then ((uint4*)(O + i * D))[0] = "
                f"row.v[0]; and [1] = row.v[1].")
    return (f"your kernel stored {got:,} sectors of 32 bytes to global memory; O's {n} rows of {HEAD} halves take at "
            f"most {limit:,} (one 32-byte sector a row, written as two 16-byte vectors), so the rest went somewhere "
            f"else: the {n} x {n} scores or probabilities, in scratch, a __device__ array or a thread's own array "
            f"indexed by the key (local memory, which is DRAM on a GPU). That is version 1 or 2 of the lesson in one "
            f"launch. Keep a row's scores in registers as they are made: the running maximum m, the running sum l "
            f"of exp(s - m), and the output row o, each rescaled by exp(m_old - m_new) when the maximum grows; "
            f"scratch stays untouched.")


def _attention_mixups(case, expected, got):
    inputs = case.inputs
    out = got["O"].astype(np.float64)

    def spec(**changes):
        return fused_attention_spec(**{**inputs, **changes}).astype(np.float64)

    def near(a, rtol=2.0 ** -9, atol=2.0 ** -11):
        return np.allclose(out, a, rtol=rtol, atol=atol)

    if near(spec(scale=np.float32(1.0))):
        return "the scores are not scaled: multiply q . k by scale (1 / sqrt(16)) before the softmax"
    if int(inputs["causal"]) and near(spec(causal=np.int32(0))):
        return "causal is ignored: with causal = 1 query i sees keys 0 .. i only (stop the key loop at i + 1)"
    q, k, v = (inputs[name].astype(np.float64) for name in ("Q", "K", "V"))
    s = float(inputs["scale"]) * q @ k.T
    if int(inputs["causal"]):
        s = np.where(np.tril(np.ones(s.shape, bool)), s, -np.inf)
    unnormalised = np.exp(s - s.max(axis=1, keepdims=True)) @ v
    if near(unnormalised, rtol=2.0 ** -8, atol=2.0 ** -9):
        return "O is not normalised: divide the output row by l, the sum of the weights, once, at the end"
    if np.allclose(out, expected["O"].astype(np.float64), rtol=0.05, atol=0.01):
        return ("close, but outside FP16's tolerance: keep m, l and the output row in float (FP32), widen each Q, K "
                "and V element with __half2float as you read it, and round to __half once, when O is written")
    return None


register(Exercise(
    id="14.fused_attention",
    title="Fused attention in FP16: the N x N scores never leave the chip",
    text="Write attention for one head of N rows of 16 features, O = softmax(mask(scale Q K^T)) V, as one kernel: "
         "one thread a query row, the keys streamed past it with the online softmax (a running maximum m, a running "
         "sum l, the output row rescaled by exp(m_old - m_new) when m grows). Q, K, V and O are __half in global "
         "memory; every product, maximum and sum is float, and O is rounded to __half once. With causal = 1 query i "
         "sees keys 0 .. i only. scratch holds N x N floats of global memory: where an unfused kernel would keep "
         "the scores. Yours must not need it: the check counts the sectors your kernel writes to global memory "
         "(stores, atomics and reductions, local memory included; on the emulator, on a GPU too: the method is "
         "judged on the emulator) and refuses more than O itself takes, 2 N: each row's 32 bytes are one sector, "
         "which a thread writing its row as two 16-byte vectors (uint4) touches twice. And it compares O with the "
         "float64 result within FP16's tolerance.",
    kernel="fused_attention", params=("O", "scratch", "Q", "K", "V", "N", "scale", "causal"), outputs=("O",),
    workspaces=("scratch",),
    reference=fused_attention_spec, cases=fused_attention_cases,
    stub=r"""
#include <cuda_fp16.h>
#define D 16   // features a head

// O[i] = sum_j P[i][j] V[j] with P[i] = softmax over the visible keys j of scale * (Q[i] . K[j]); one thread
// a query row i. Rows are D halves: element c of row i is at i * D + c. causal: keys j <= i only.
extern "C" __global__ void fused_attention(__half* O, float* scratch, const __half* Q, const __half* K,
                                           const __half* V, int N, float scale, int causal) {
    // FILL ME IN (roughly 18 lines)
}
""",
    solution=r"""
#include <cuda_fp16.h>
#define D 16   // features a head

extern "C" __global__ void fused_attention(__half* O, float* scratch, const __half* Q, const __half* K,
                                           const __half* V, int N, float scale, int causal) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float q[D], o[D];                                // this row's query and output, in registers
    for (int c = 0; c < D; c++) { q[c] = __half2float(Q[i * D + c]) * scale; o[c] = 0.0f; }
    float m = -INFINITY, l = 0.0f;                   // the running maximum and sum of exp(s - m)
    int keys = causal ? i + 1 : N;
    for (int j = 0; j < keys; j++) {
        float s = 0.0f;
        for (int c = 0; c < D; c++) s += q[c] * __half2float(K[j * D + c]);
        float m_new = fmaxf(m, s);
        float correction = expf(m - m_new);          // what was summed relative to m, now relative to m_new
        float p = expf(s - m_new);
        l = l * correction + p;
        for (int c = 0; c < D; c++) o[c] = o[c] * correction + p * __half2float(V[j * D + c]);
        m = m_new;
    }
    union { uint4 v[D / 8]; __half2 h[D / 2]; } row;  // the row rounded to half once, in registers
    for (int c = 0; c < D; c += 2) row.h[c / 2] = __floats2half2_rn(o[c] / l, o[c + 1] / l);
    uint4* out = (uint4*)(O + i * D);                // 32 bytes: one sector, written as two 16-byte vectors
    out[0] = row.v[0];
    out[1] = row.v[1];
}
""",
    launch=f"block = ({ROWS}, 1, 1), grid = (ceil_div(N, {ROWS}), 1)",
    rtol=2.0 ** -9, atol=2.0 ** -11,   # O rounded to half (2^-11 relative) after float32 sums: two ulps of slack
    diagnoses=(_attention_mixups,), no_extern_c=True,
    requirements=(Requirement(STORE_SECTORS, at_most=output_sectors, hint=_stores_hint),),
))


# ---- napkin math: the bytes each version stores -------------------------------------------------------------

def stored_bytes_reference(version, batch, seq, heads, head_dim):
    problems = batch * heads
    out = 4 * batch * seq * heads * head_dim
    matrix = 4 * problems * seq * seq
    return {1: 2 * matrix + out, 2: matrix + out, 3: out + 4 * problems * seq}[version]


def stored_bytes_cases(rng):
    yield "version 1, one head of 40 rows of 16", dict(version=1, batch=1, seq=40, heads=1, head_dim=16)
    yield "version 2, one head of 40 rows of 16", dict(version=2, batch=1, seq=40, heads=1, head_dim=16)
    yield "version 3, one head of 40 rows of 16", dict(version=3, batch=1, seq=40, heads=1, head_dim=16)
    yield "version 1, a batch of 8, 12 heads of 64, 1,024 positions", dict(version=1, batch=8, seq=1024, heads=12,
                                                                          head_dim=64)
    yield "version 3, a batch of 8, 12 heads of 64, 1,024 positions", dict(version=3, batch=8, seq=1024, heads=12,
                                                                          head_dim=64)
    for _ in range(6):
        yield_args = dict(version=int(rng.integers(1, 4)), batch=int(rng.integers(1, 9)),
                          seq=int(rng.integers(1, 5000)), heads=int(rng.integers(1, 17)),
                          head_dim=int(rng.choice([16, 32, 64, 128])))
        yield ", ".join(f"{k}={v}" for k, v in yield_args.items()), yield_args


def _formula(version, batch, seq, heads, head_dim, per_problem=True, two_matrices=True, lse=True):
    """stored_bytes_reference's formula, or one of the mistakes it can be made with."""
    problems = batch * heads
    out = 4 * batch * seq * heads * head_dim
    matrix = 4 * (problems if per_problem else 1) * seq * seq
    return {1: (2 if two_matrices else 1) * matrix + out, 2: matrix + out,
            3: out + (4 * problems * seq if lse else 0)}[version]


def _bytes_mixups(kwargs, expected, got):
    if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
        return None      # the check says what an int is
    if got * 4 == expected:
        return "that is a count of floats: each float32 is 4 bytes"
    if got == _formula(**kwargs, lse=False):
        return "version 3 also stores each row's log-sum-exp (one float a row and head), which the backward needs"
    if got == _formula(**kwargs, two_matrices=False):
        return "version 1 stores two N x N matrices: the scores S, then the softmax's output P"
    if got == _formula(**kwargs, per_problem=False):
        return "every (batch, head) pair is a problem of its own, with its own N x N matrix"
    return None


register(FunctionExercise(
    id="14.stored_bytes",
    title="The bytes each attention version stores to global memory",
    text="The lesson's profiler counted what each version of attention writes to global memory. Write the napkin "
         "formula: return the bytes version 1, 2 or 3 stores for q, k, v of [batch, seq, heads * head_dim] float32 "
         "(an int). Version 1 stores the scores S and the probabilities P (N x N each, per batch and head) and "
         "O; version 2 stores P and O; version 3 stores O and one log-sum-exp float per row, batch and head.",
    function="stored_bytes",
    cases=stored_bytes_cases,
    reference=stored_bytes_reference,
    stub='''def stored_bytes(version, batch, seq, heads, head_dim):
    """Bytes attention version 1, 2 or 3 stores to global memory (float32 everywhere)."""
    # FILL ME IN (roughly 5 lines)
''',
    solution='''def stored_bytes(version, batch, seq, heads, head_dim):
    """Bytes attention version 1, 2 or 3 stores to global memory (float32 everywhere)."""
    problems = batch * heads                      # each (batch, head) pair is a problem of its own
    out = 4 * batch * seq * heads * head_dim      # O, every version
    matrix = 4 * problems * seq * seq             # one N x N matrix per problem
    return {1: 2 * matrix + out, 2: matrix + out, 3: out + 4 * problems * seq}[version]
''',
    diagnoses=(_bytes_mixups,),
))
