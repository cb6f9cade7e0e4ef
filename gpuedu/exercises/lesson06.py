"""Exercises of lessons/06_training_an_mlp.ipynb: the loss gradient that starts backpropagation."""
import numpy as np

from . import Case, Exercise, ceil_div, register

ROWS_BLOCK = 128


def xent_grad_spec(logits, labels, rows, classes):
    z = logits.astype(np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(rows), labels] -= 1.0
    return (p / rows).astype(np.float32)


def xent_grad_cases(rng):
    for label, rows, classes, scale in [("1 row, 10 classes", 1, 10, 1.0), ("32 x 10", 32, 10, 3.0),
                                        (f"{ROWS_BLOCK + 3} x 7", ROWS_BLOCK + 3, 7, 2.0),
                                        ("20 x 10 with logits near 200 (exp overflows float)", 20, 10, 200.0)]:
        logits = (rng.standard_normal((rows, classes)) * scale).astype(np.float32)
        if scale > 100:
            logits += np.float32(150.0)
        labels = rng.integers(0, classes, rows).astype(np.int32)
        yield Case(label, {"logits": logits, "labels": labels, "rows": np.int32(rows), "classes": np.int32(classes)},
                   block=(ROWS_BLOCK, 1, 1), grid=(ceil_div(rows, ROWS_BLOCK), 1))


def _xent_not_averaged(case, expected, got):
    rows = int(case.inputs["rows"])
    if rows > 1 and np.allclose(got["dlogits"], expected["dlogits"] * rows, rtol=1e-4, atol=1e-6):
        return "dlogits is `rows` times too large: the loss is the mean over the batch, so divide by rows."
    return None


def _xent_overflow(case, expected, got):
    # Only on the case whose logits overflow exp, and only if the kernel wrote something finite too
    # (an output that was never written is NaN everywhere, which another hint explains).
    out = got["dlogits"]
    finite = np.isfinite(out)
    if case.inputs["logits"].max() > 88.0 and finite.any() and not finite.all():
        return ("NaN or inf in dlogits: exp(200) overflows float. Subtract the row's maximum before exp; "
                "softmax does not change when every logit of a row moves by the same amount.")
    return None


register(Exercise(
    id="06.xent_grad",
    title="Softmax cross-entropy gradient, one thread per row",
    text="Training starts the backward pass at the loss. For the mean cross-entropy of softmax(z) the "
         "gradient is remarkably simple: dL/dz[b, j] = (softmax(z[b])[j] - [j == labels[b]]) / rows. "
         "Give each thread one row: find the row's maximum, sum exp(z - max), then write every class's "
         "gradient. One case has logits near 200, where exp without the max subtracted overflows.",
    kernel="xent_grad", params=("dlogits", "logits", "labels", "rows", "classes"), outputs=("dlogits",),
    reference=xent_grad_spec, cases=xent_grad_cases,
    stub=r"""
// dlogits[b, j] = (softmax(logits[b])[j] - (j == labels[b])) / rows; one thread per row b < rows.
__global__ void xent_grad(float* dlogits, const float* logits, const int* labels, int rows, int classes) {
    // FILL ME IN (roughly 12 lines)
}
""",
    solution=r"""
__global__ void xent_grad(float* dlogits, const float* logits, const int* labels, int rows, int classes) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= rows) return;                       // the last block runs past the batch
    const float* z = logits + b * classes;
    float m = z[0];
    for (int j = 1; j < classes; ++j) m = fmaxf(m, z[j]);
    float s = 0.0f;
    for (int j = 0; j < classes; ++j) s += expf(z[j] - m);   // every term <= 1: no overflow
    for (int j = 0; j < classes; ++j)
        dlogits[b * classes + j] = (expf(z[j] - m) / s - (j == labels[b] ? 1.0f : 0.0f)) / rows;
}
""",
    launch=f"block = ({ROWS_BLOCK}, 1, 1), grid = (ceil_div(rows, {ROWS_BLOCK}), 1); labels are int32",
    rtol=1e-4, atol=1e-6,
    diagnoses=(_xent_overflow, _xent_not_averaged),
))
