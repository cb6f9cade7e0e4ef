"""Exercises of lessons/09_batching_and_throughput.ipynb: momentum, the optimizer large batches lean on."""
import numpy as np

from . import Case, Exercise, ceil_div, register, sizes_1d

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
