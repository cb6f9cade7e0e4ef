"""Exercises of lessons/07_mixed_precision.ipynb: half-precision kernels."""
import numpy as np

from . import Case, Exercise, ceil_div, register

# cuda_fp16.h is a C++ header (overloaded operators), so it cannot sit inside the extern "C" { }
# block a source is normally compiled in: these sources include it and declare their kernel
# `extern "C"` themselves (no_extern_c=True), as the kernel files of gpuedu/kernels do.
BLOCK = 256

# ---------------------------------------------------------------------------------------------
# 07.float_to_half: convert with round-to-nearest-even


def float_to_half_spec(x, n):
    with np.errstate(over="ignore"):             # past 65504 the answer is Inf, on purpose
        return x.astype(np.float16)              # numpy rounds to nearest, ties to even


def float_to_half_cases(rng):
    # Values exactly halfway between two halves (ties), just beside them, past the largest half,
    # in the subnormal range and below it, then random normals; sizes that are not multiples of
    # the block.
    ties = (np.float32(1.0) + np.float32(2.0 ** -11) * np.arange(1, 64, 2, dtype=np.float32))
    special = np.array([65504, 65519, 65520, 1e6, -1e6, 2.0 ** -24, 2.0 ** -25, 3e-8, 1e-9, 0.0, -0.0,
                        np.inf, -np.inf], np.float32)
    base = np.concatenate([ties, -ties, special])
    for label, n in (("n = 1", 1), (f"n = {len(base)} (ties and edge values)", len(base)),
                     (f"n = {BLOCK + 1}", BLOCK + 1), ("n = 5000", 5000)):
        x = rng.standard_normal(n).astype(np.float32) * np.float32(100)
        x[:min(n, len(base))] = base[:n]
        yield Case(label, {"x": x, "n": np.int32(n)}, block=(BLOCK, 1, 1), grid=(ceil_div(n, BLOCK), 1))


def _truncated(case, expected, got):
    x = case.inputs["x"]
    wrong = got["out"] != expected["out"]
    if wrong.any() and np.all(np.abs(got["out"][wrong].astype(np.float64)) <=
                              np.abs(x[wrong].astype(np.float64))):
        return ("the wrong results are all rounded toward zero: use round-to-nearest-even, "
                "__float2half_rn(x) (not __float2half_rz, and not a cast of the bits).")
    return None


FLOAT_TO_HALF_STUB = r"""
#include <cuda_fp16.h>

// out[i] = x[i] rounded to the nearest half (ties to even), for every i < n.
extern "C" __global__ void float_to_half(__half* out, const float* x, int n) {
    // FILL ME IN (roughly 3 lines)
}
"""

FLOAT_TO_HALF_SOLUTION = r"""
#include <cuda_fp16.h>

extern "C" __global__ void float_to_half(__half* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = __float2half_rn(x[i]);   // rn: round to nearest, ties to even
}
"""

register(Exercise(
    id="07.float_to_half",
    title="Convert float to half, rounding to nearest even",
    text="Each thread converts one float32 to float16. A half keeps 10 fraction bits of float's 23: "
         "the 13 bits dropped decide the rounding, and a value exactly halfway rounds to the even "
         "neighbour. Values past 65504 (from 65520 on) become Inf, and below 2**-14 they lose bits "
         "(subnormals) or become 0. The cases include ties, overflow and underflow.",
    kernel="float_to_half", params=("out", "x", "n"), outputs=("out",),
    reference=float_to_half_spec, cases=float_to_half_cases, stub=FLOAT_TO_HALF_STUB,
    solution=FLOAT_TO_HALF_SOLUTION,
    launch=f"block = ({BLOCK}, 1, 1), grid = (ceil_div(n, {BLOCK}), 1); n is np.int32",
    diagnoses=(_truncated,), no_extern_c=True,
))

# ---------------------------------------------------------------------------------------------
# 07.half2_axpy: two halves per thread


def half2_axpy_spec(y, x, n, a):
    a16 = np.float16(a)
    # __hfma2 computes a*x + y exactly and rounds once; float64 holds a*x + y exactly here.
    return (np.float64(a16) * x.astype(np.float64) + y.astype(np.float64)).astype(np.float16)


def half2_axpy_cases(rng):
    # Thread t owns elements 2t and 2t+1: 256 threads cover 512 elements.  Odd n leaves one
    # element without a partner.  (Sizes up to 1024 or even: every __half2 stays 4-byte aligned.)
    pairs_per_block = BLOCK
    for label, n in (("n = 1", 1), ("n = 2", 2), ("n = 511 (odd)", 511), ("n = 512", 512),
                     ("n = 513 (one more block)", 513), ("n = 1001 (odd)", 1001), ("n = 100000", 100_000)):
        x = rng.uniform(-1, 1, n).astype(np.float16)
        y = rng.uniform(-1, 1, n).astype(np.float16)
        a = np.float32(rng.choice([0.75, -1.5, 0.1]))
        yield Case(label, {"y": y, "x": x, "n": np.int32(n), "a": a}, block=(BLOCK, 1, 1),
                   grid=(ceil_div(ceil_div(n, 2), pairs_per_block), 1))


def _no_tail(case, expected, got):
    n = int(case.inputs["n"])
    if np.array_equal(got["y"], case.inputs["y"]):
        return None                              # nothing written at all: the generic hint says so
    wrong = np.flatnonzero(got["y"] != expected["y"])
    if n % 2 == 1 and wrong.size == 1 and wrong[0] == n - 1:
        return ("only the last element is wrong and n is odd: the thread whose pair starts at n - 1 has "
                "no partner, so it must update y[n - 1] alone with __hfma on a single __half.")
    if wrong.size and wrong.size >= (n + 1) // 2 and np.all(got["y"][1::2] == case.inputs["y"][1::2]):
        return ("every second element is unchanged: each thread must update two elements, one __half2 "
                "(elements 2*t and 2*t + 1).")
    return None


HALF2_AXPY_STUB = r"""
#include <cuda_fp16.h>

// y = a*x + y on n halves, two per thread: thread t updates elements 2t and 2t+1 as one __half2
// (if n is odd, the last thread updates y[n-1] alone).
extern "C" __global__ void half2_axpy(__half* y, const __half* x, int n, float a) {
    // FILL ME IN (roughly 10 lines)
}
"""

HALF2_AXPY_SOLUTION = r"""
#include <cuda_fp16.h>

extern "C" __global__ void half2_axpy(__half* y, const __half* x, int n, float a) {
    int pair = blockIdx.x * blockDim.x + threadIdx.x;
    int i = 2 * pair;
    if (i + 1 < n) {
        __half2 a2 = __float2half2_rn(a);                         // a in both lanes
        __half2 x2 = reinterpret_cast<const __half2*>(x)[pair];   // elements i and i + 1
        __half2 y2 = reinterpret_cast<__half2*>(y)[pair];
        reinterpret_cast<__half2*>(y)[pair] = __hfma2(a2, x2, y2);
    } else if (i < n) {
        y[i] = __hfma(__float2half_rn(a), x[i], y[i]);           // the lone last element
    }
}
"""

register(Exercise(
    id="07.half2_axpy",
    title="axpy on half2: two halves per thread",
    text="y = a*x + y in float16, two elements per thread: read x and y as __half2 (reinterpret the "
         "pointer; element pair t is __half2 number t), compute both lanes with one __hfma2 (a fused "
         "multiply-add: one rounding), and write the __half2 back. When n is odd the thread owning the "
         "last pair has only one element: handle it with __hfma on a __half. The grid covers "
         "ceil(n / 2) threads.",
    kernel="half2_axpy", params=("y", "x", "n", "a"), outputs=("y",),
    reference=half2_axpy_spec, cases=half2_axpy_cases, stub=HALF2_AXPY_STUB,
    solution=HALF2_AXPY_SOLUTION,
    launch=f"block = ({BLOCK}, 1, 1), grid = (ceil_div(ceil_div(n, 2), {BLOCK}), 1); n is np.int32, "
           f"a is np.float32",
    rtol=2.0 ** -10, atol=2.0 ** -11,   # __hmul2 then __hadd2 (two roundings) is also accepted
    diagnoses=(_no_tail,), no_extern_c=True,
))
