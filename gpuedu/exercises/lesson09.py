"""Exercises of lessons/09_batching_and_throughput.ipynb: momentum and Adam, the optimizers large batches lean on
(Adam's traffic counted), and choosing the batch size from the step-time model."""
import numpy as np

from . import Case, Exercise, FunctionExercise, Requirement, ceil_div, register, sizes_1d
from ._exercise import global_reads, global_writes

BLOCK = 256


def momentum_spec(w, v, g, n, lr, mu):
    v_new = (mu * v + g).astype(np.float32)
    return {"w": (w - lr * v_new).astype(np.float32), "v": v_new}


def momentum_cases(rng):
    for label, n in sizes_1d(rng, BLOCK):
        yield Case(label, {"w": rng.standard_normal(n).astype(np.float32),
                           "v": rng.standard_normal(n).astype(np.float32),
                           "g": rng.standard_normal(n).astype(np.float32),
                           "lr": np.float32(0.05), "mu": np.float32(0.9), "n": np.int32(n)},
                   block=(BLOCK, 1, 1), grid=(ceil_div(n, BLOCK), 1))


def _momentum_not_stored(case, expected, got):
    # Only when w did move: an untouched kernel leaves both unchanged, which the generic hint explains.
    if (np.array_equal(got["v"], case.inputs["v"]) and not np.array_equal(got["w"], case.inputs["w"])
            and not np.array_equal(expected["v"], case.inputs["v"])):
        return "v is unchanged: store the new velocity, or the next step starts from the old one."
    return None


def _momentum_old_velocity(case, expected, got):
    w, v, lr = case.inputs["w"], case.inputs["v"], case.inputs["lr"]
    if np.allclose(got["w"], w - lr * v, rtol=1e-5, atol=1e-6):
        return "w moved with the old velocity: update v first, then step w with the new v."
    return None


register(Exercise(
    id="09.sgd_momentum",
    title="SGD with momentum: v = mu v + g, w = w - lr v",
    text="Momentum keeps a running velocity per weight, an exponentially weighted sum of past gradients, "
         "and steps along it. It smooths the noise of small batches and lets large batches take larger "
         "effective steps. Update v and w in place, one thread per weight.",
    kernel="sgd_momentum", params=("w", "v", "g", "n", "lr", "mu"), outputs=("w", "v"),
    reference=momentum_spec, cases=momentum_cases,
    stub=r"""
// v[i] = mu * v[i] + g[i];  w[i] = w[i] - lr * v[i]   (the new v), for every i < n, in place.
__global__ void sgd_momentum(float* w, float* v, const float* g, int n, float lr, float mu) {
    // FILL ME IN (roughly 6 lines)
}
""",
    solution=r"""
__global__ void sgd_momentum(float* w, float* v, const float* g, int n, float lr, float mu) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;                 // the last block runs past n
    float vel = mu * v[i] + g[i];
    v[i] = vel;
    w[i] -= lr * vel;
}
""",
    launch=f"block = ({BLOCK}, 1, 1), grid = (ceil_div(n, {BLOCK}), 1); lr, mu are np.float32",
    rtol=1e-5, atol=1e-6,
    diagnoses=(_momentum_not_stored, _momentum_old_velocity),
))

# ---------------------------------------------------------------------------------------------
# 09.adam: Adam's update, fused: each weight's 28 bytes cross memory once

LOAD_REQUESTS = global_reads("requests")     # loads (local ones too), and atomics and reductions, which read too
STORE_REQUESTS = global_writes("requests")   # stores (local ones too), and atomics and reductions, which write too


def adam_spec(w, m, v, g, n, lr, beta1, beta2, eps, c1, c2):
    g64 = g.astype(np.float64)
    m_new = beta1 * m.astype(np.float64) + (1 - beta1) * g64
    v_new = beta2 * v.astype(np.float64) + (1 - beta2) * g64 * g64
    w_new = w - lr * (m_new * c1) / (np.sqrt(v_new * c2) + eps)
    return {"w": w_new.astype(np.float32), "m": m_new.astype(np.float32), "v": v_new.astype(np.float32)}


def adam_cases(rng):
    for (label, n), (t, eps) in zip(sizes_1d(rng, BLOCK), [(1, 1e-8), (2, 1e-8), (10, 1e-8), (100, 0.1), (1000, 1e-8)]):
        beta1, beta2 = 0.9, 0.999
        yield Case(f"{label}, step t = {t}" + (f", eps = {eps:g}" if eps != 1e-8 else ""),
                   {"w": rng.standard_normal(n).astype(np.float32),
                    "m": (0.1 * rng.standard_normal(n)).astype(np.float32),
                    "v": rng.uniform(0.01, 1.0, n).astype(np.float32),
                    "g": rng.standard_normal(n).astype(np.float32), "n": np.int32(n),
                    "lr": np.float32(0.01), "beta1": np.float32(beta1), "beta2": np.float32(beta2),
                    "eps": np.float32(eps), "c1": np.float32(1 / (1 - beta1 ** t)),
                    "c2": np.float32(1 / (1 - beta2 ** t))},
                   block=(BLOCK, 1, 1), grid=(ceil_div(n, BLOCK), 1))


def _adam_step(case, m_new, v_new, c1=None, c2=None, eps_inside=False):
    i = {k: np.float64(v) if np.ndim(v) == 0 else v.astype(np.float64) for k, v in case.inputs.items()}
    c1 = i["c1"] if c1 is None else c1
    c2 = i["c2"] if c2 is None else c2
    if eps_inside:
        return i["w"] - i["lr"] * (m_new * c1) / np.sqrt(v_new * c2 + i["eps"])
    return i["w"] - i["lr"] * (m_new * c1) / (np.sqrt(v_new * c2) + i["eps"])


def _close(got, want):
    return np.allclose(got, want, rtol=1e-4, atol=1e-6)


def _adam_mixups(case, expected, got):
    i = case.inputs
    m_old, v_old = i["m"].astype(np.float64), i["v"].astype(np.float64)
    m_new, v_new = expected["m"].astype(np.float64), expected["v"].astype(np.float64)
    if _close(got["m"], m_new) and not _close(got["v"], v_new) and _close(
            got["v"], i["beta2"] * v_old + (1 - i["beta2"]) * i["g"]):
        return "v averages the gradient, not its square: v = beta2 v + (1 - beta2) g * g."
    if not _close(got["w"], expected["w"]):
        if _close(got["w"], _adam_step(case, m_new, v_new, 1.0, 1.0)):
            return ("the bias corrections are missing: m and v start at 0, so their averages are too small by a "
                    "factor (1 - beta^t) early on; multiply m by c1 and v by c2 before the step.")
        if _close(got["w"], _adam_step(case, m_new, v_new, 1 / i["c1"], 1 / i["c2"])):
            return "c1 and c2 are already 1 / (1 - beta^t): multiply m and v by them, do not divide."
        if _close(got["w"], _adam_step(case, m_old, v_old)):
            return "w stepped with the old m and v: update them first, then step w with the new ones."
        if _close(got["w"], _adam_step(case, m_new, v_new, eps_inside=True)):
            return "eps goes outside the square root: w -= lr * (m c1) / (sqrt(v c2) + eps)."
    moved = not np.array_equal(got["w"], i["w"])     # an untouched kernel: the generic hint says it
    for name in ("m", "v") if moved else ():
        if np.array_equal(got[name], i[name]) and not np.array_equal(expected[name], i[name]):
            return f"{name} is unchanged: store the new {name}, or the next step starts from the old one."
    return None


def _warps(case):
    return ceil_div(int(case.inputs["n"]), 32)   # warps with at least one thread below n


def _loads_hint(case, got, limit, metrics):
    warps = _warps(case)
    return (f"your kernel issued {got / warps:.1f} global read instructions (loads, atomics) per warp; Adam needs 4, one each of w, g, "
            f"m and v. A load after a store is a load again: after m[i] = ... the compiler must assume that g or "
            f"v may be the same memory, and reads them anew. Read each array once into a register (float gi = "
            f"g[i]; ...), compute, then store m, v and w (or mark the pointers __restrict__). An optimizer does "
            f"almost no arithmetic: its time is its memory traffic, 28 bytes a weight when each is moved once.")


def _stores_hint(case, got, limit, metrics):
    return (f"your kernel issued {got / _warps(case):.1f} global write instructions (stores, atomics) per warp; Adam needs 3, one "
            f"each of w, m and v. Keep intermediate values in registers and store each array once, at the end.")


register(Exercise(
    id="09.adam",
    title="Adam, fused: read w, g, m, v once, write w, m, v once",
    text="Adam (Kingma and Ba, 2015), the optimizer lesson 06 trained with, keeps two running averages per weight, "
         "of the gradient (m) and of its square (v), and steps each weight by m / sqrt(v): about lr whatever the "
         "gradient's scale. Both averages start at 0, so at step t they are corrected by c1 = 1 / (1 - beta1^t) and "
         "c2 = 1 / (1 - beta2^t), computed once per step on the host. The update does almost no arithmetic "
         "per weight, so its cost is the bytes it moves: the check also counts your global load and store "
         "instructions, one per array and warp.",
    kernel="adam", params=("w", "m", "v", "g", "n", "lr", "beta1", "beta2", "eps", "c1", "c2"),
    outputs=("w", "m", "v"),
    reference=adam_spec, cases=adam_cases,
    stub=r"""
// m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;  w -= lr * (m c1) / (sqrt(v c2) + eps)
// (the new m and v), for every i < n, in place; c1 = 1 / (1 - beta1^t), c2 = 1 / (1 - beta2^t).
__global__ void adam(float* w, float* m, float* v, const float* g, int n,
                     float lr, float beta1, float beta2, float eps, float c1, float c2) {
    // FILL ME IN (roughly 9 lines)
}
""",
    solution=r"""
__global__ void adam(float* w, float* m, float* v, const float* g, int n,
                     float lr, float beta1, float beta2, float eps, float c1, float c2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;                           // the last block runs past n
    float gi = g[i];                              // each array read once, into a register
    float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * (mi * c1) / (sqrtf(vi * c2) + eps);
}
""",
    launch=f"block = ({BLOCK}, 1, 1), grid = (ceil_div(n, {BLOCK}), 1); the scalars are np.float32",
    rtol=1e-5, atol=1e-6,
    diagnoses=(_adam_mixups,),
    requirements=(Requirement(LOAD_REQUESTS, at_most=lambda case: 4 * _warps(case), hint=_loads_hint),
                  Requirement(STORE_REQUESTS, at_most=lambda case: 3 * _warps(case), hint=_stores_hint)),
))

# ---------------------------------------------------------------------------------------------
# 09.smallest_efficient_batch: choosing the batch size from the step-time model t(B) = t0 + B t1


def smallest_efficient_batch_reference(t0, t1, fraction, batch_sizes):
    for batch in sorted(batch_sizes):
        if batch / (t0 + batch * t1) >= fraction / t1:
            return batch
    return None


def _threshold(t0, t1, fraction):
    return fraction * t0 / ((1 - fraction) * t1)


# One training step of a 784-1024-1024-10 MLP at two batch sizes, measured on an H200 (gpuedu bench, 2026-11-26,
# benchmarks/results/nvidia-h200.json: mlp_step_b128 and mlp_step_b4096, in images/s), and the line through them.
H200_STEP_SECONDS = {128: 128 / 310_836.6, 4096: 4096 / 3_249_349.4}
H200_T1 = (H200_STEP_SECONDS[4096] - H200_STEP_SECONDS[128]) / (4096 - 128)
H200_T0 = H200_STEP_SECONDS[128] - 128 * H200_T1


def smallest_efficient_batch_cases(rng):
    powers = [2 ** k for k in range(13)]
    yield ("an emulator fit from an earlier run of this lesson (t0 = 544 us, t1 = 13.56 us), 90% of the ceiling",
           dict(t0=544e-6, t1=13.56e-6, fraction=0.9, batch_sizes=powers))
    yield ("the same fit, half of the ceiling (the knee B* = t0 / t1)",
           dict(t0=544e-6, t1=13.56e-6, fraction=0.5, batch_sizes=powers))
    yield ("the H200 of this lesson's napkin math (t0 = 68 us, t1 = 0.85 ns, modelled), 50%: out of reach",
           dict(t0=11 * 6.2e-6, t1=57e3 / 67e12, fraction=0.5, batch_sizes=powers))
    yield (f"the line through two steps measured on an H200 (t0 = {H200_T0 * 1e6:.0f} us, t1 = {H200_T1 * 1e6:.2f} us), "
           f"50%", dict(t0=H200_T0, t1=H200_T1, fraction=0.5, batch_sizes=powers))
    yield ("sizes not in order, 75%", dict(t0=200e-6, t1=1e-6, fraction=0.75, batch_sizes=[4096, 64, 1024, 256, 16]))
    found = 0
    while found < 3:      # random models, none with a batch size within 1% of the threshold
        t0, t1 = float(10 ** rng.uniform(-5, -3)), float(10 ** rng.uniform(-8, -5))
        fraction = float(rng.choice([0.5, 0.8, 0.9, 0.95]))
        need = _threshold(t0, t1, fraction)
        if 1 <= need <= 4096 and min(abs(b / need - 1) for b in powers) > 0.01:
            found += 1
            yield (f"t0 = {t0 * 1e6:.1f} us, t1 = {t1 * 1e6:.3f} us, {fraction:.0%} (random)",
                   dict(t0=t0, t1=t1, fraction=fraction, batch_sizes=powers))


def _batch_mixups(kwargs, expected, got):
    t0, t1, fraction, sizes = kwargs["t0"], kwargs["t1"], kwargs["fraction"], kwargs["batch_sizes"]
    if got is not None and got not in sizes:
        return ("return one of batch_sizes, the smallest that is enough: the bound f t0 / ((1 - f) t1) itself is "
                "rarely a batch size the loader can use.")
    knee = next((b for b in sorted(sizes) if b >= t0 / t1), None)
    if fraction != 0.5 and knee is not None and got == knee:
        return ("B* = t0 / t1 is where throughput reaches half of its ceiling 1 / t1; for a fraction f solve "
                "B / (t0 + B t1) >= f / t1, which gives B >= f t0 / ((1 - f) t1).")
    largest = max(sizes)
    best = largest / (t0 + largest * t1)
    if got == next((b for b in sorted(sizes) if b / (t0 + b * t1) >= fraction * best), None):
        return ("the ceiling is 1 / t1, the throughput of an endless batch, not the throughput of the largest "
                "batch in the list.")
    if expected is None:
        return ("no batch size in the list reaches the fraction here (the bound f t0 / ((1 - f) t1) lies beyond "
                "the largest): return None.")
    if sizes != sorted(sizes) and got == next((b for b in sizes if b / (t0 + b * t1) >= fraction / t1), None):
        return "batch_sizes need not be in order: return the smallest size that reaches the fraction."
    if got == largest:
        return "the largest batch is never slower, but the question is the smallest batch that is fast enough."
    return None


register(FunctionExercise(
    id="09.smallest_efficient_batch",
    title="Choose the batch size from the step-time model",
    text="This lesson models a training step as t(B) = t0 + B t1: a fixed cost t0 (the launches) and t1 per "
         "image. Throughput B / (t0 + B t1) climbs towards a ceiling of 1 / t1 that no batch reaches. A larger "
         "batch than needed only costs accuracy per epoch (fewer updates), so pick the smallest batch that is "
         "fast enough: return the smallest of batch_sizes (an int) whose modelled throughput is at least "
         "`fraction` of the ceiling, or None if none is. t0 and t1 are in seconds.",
    function="smallest_efficient_batch",
    cases=smallest_efficient_batch_cases,
    reference=smallest_efficient_batch_reference,
    stub='''def smallest_efficient_batch(t0, t1, fraction, batch_sizes):
    """The smallest of batch_sizes whose modelled throughput B / (t0 + B t1) reaches fraction / t1, or None."""
    # FILL ME IN (roughly 4 lines)
''',
    solution='''def smallest_efficient_batch(t0, t1, fraction, batch_sizes):
    """The smallest of batch_sizes whose modelled throughput B / (t0 + B t1) reaches fraction / t1, or None."""
    for batch in sorted(batch_sizes):                       # the smallest first
        if batch / (t0 + batch * t1) >= fraction / t1:      # images/s against the ceiling 1 / t1
            return batch
    return None                                             # even the largest is too slow
''',
    launch="smallest_efficient_batch(t0, t1, fraction, batch_sizes) is called for 8 models (an emulator fit, "
           "the napkin math's H200, a line through two steps measured on an H200, 5 others) and compared with the "
           "reference's choice",
    returns=("int", "None"),
    diagnoses=(_batch_mixups,),
))
