"""Exercises of lessons/06_training_an_mlp.ipynb: the loss gradient that starts backpropagation, the accuracy
counted on the device, and what an epoch costs in launches."""
import functools
import math

import numpy as np

from . import Case, Exercise, FunctionExercise, Requirement, ceil_div, register

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

# ---------------------------------------------------------------------------------------------
# 06.count_correct: accuracy on the device, one global atomic per block

COUNT_BLOCK = 128
# Global atomics whose result is read (ATOM) and whose result is discarded (RED, as atomicAdd(correct, hits); is).
GLOBAL_ATOMICS = ("smsp__sass_thread_inst_executed_op_global_atom.sum",
                  "smsp__sass_thread_inst_executed_op_global_red.sum")


def count_correct_spec(correct, logits, labels, rows, classes):
    hits = int(np.sum(np.argmax(logits, axis=1) == labels))     # np.argmax: the first maximum on ties
    return (correct + hits).astype(np.int32)


def _predicted_labels(rng, logits, share):
    """Labels that agree with the row's argmax for about ``share`` of the rows, as a half-trained network's do."""
    labels = rng.integers(0, logits.shape[1], len(logits))
    agree = rng.random(len(logits)) < share
    labels[agree] = np.argmax(logits[agree], axis=1)
    return labels.astype(np.int32)


def count_correct_cases(rng):
    for label, rows, classes, ties in [("1 row, 10 classes", 1, 10, False),
                                       ("10 rows, fewer than a block", 10, 10, False),
                                       (f"{COUNT_BLOCK} rows, one block", COUNT_BLOCK, 10, False),
                                       (f"{COUNT_BLOCK + 1} rows, one more than a block", COUNT_BLOCK + 1, 10, False),
                                       ("300 x 10 with whole-number logits (ties)", 300, 10, True),
                                       ("1000 x 7, a large batch", 1000, 7, False)]:
        if ties:    # values 0..2: most rows have several classes at their maximum
            logits = rng.integers(0, 3, (rows, classes)).astype(np.float32)
        else:
            logits = rng.standard_normal((rows, classes)).astype(np.float32)
        labels = _predicted_labels(rng, logits, 0.7)
        earlier = np.array([int(rng.integers(100, 1000))], dtype=np.int32)   # the epoch's earlier batches
        yield Case(label, {"correct": earlier, "logits": logits, "labels": labels, "rows": np.int32(rows),
                           "classes": np.int32(classes)},
                   block=(COUNT_BLOCK, 1, 1), grid=(ceil_div(rows, COUNT_BLOCK), 1))


def _count_parts(case):
    """(the count before, this batch's hits, its hits with the last maximum winning ties, hits per block)."""
    logits, labels = case.inputs["logits"], case.inputs["labels"]
    before = int(case.inputs["correct"][0])
    hit = np.argmax(logits, axis=1) == labels
    last = logits.shape[1] - 1 - np.argmax(logits[:, ::-1], axis=1)
    per_block = [int(hit[s:s + COUNT_BLOCK].sum()) for s in range(0, len(hit), COUNT_BLOCK)]
    return before, int(hit.sum()), int(np.sum(last == labels)), per_block


def _count_restarted(case, expected, got):
    before, hits, _, per_block = _count_parts(case)
    if before and (int(got["correct"][0]) == hits or int(got["correct"][0]) in per_block):
        return ("the count started again: *correct holds the hits of the epoch's earlier batches, and this batch's "
                "are added to it (atomicAdd(correct, hits)), never written over it.")
    return None


def _count_last_maximum(case, expected, got):
    before, hits, last_hits, _ = _count_parts(case)
    if last_hits != hits and int(got["correct"][0]) == before + last_hits:
        return ("on ties the last maximum won: the prediction is the first class with the largest logit (as "
                "np.argmax and the course's softmax_xent), so move to class j only when z[j] > z[best], not >=.")
    return None


def _count_one_per_block(case, expected, got):
    before, hits, _, per_block = _count_parts(case)
    if hits > len(per_block) and int(got["correct"][0]) == before + sum(1 for h in per_block if h):
        return ("the count grew by one per block: either each block added 1 instead of its number of hits "
                "(atomicAdd(correct, hits)), or thread 0 read hits before the other threads had counted theirs "
                "(__syncthreads() between counting and adding).")
    return None


def _count_lost_hits(case, expected, got):
    before, hits, _, _ = _count_parts(case)
    if before < int(got["correct"][0]) < before + hits:   # unchanged: the generic "never written" hint
        return ("hits are missing: the block's count was read before every thread had added to it, or threads "
                "added to it without an atomic. Zero it, __syncthreads(), count with atomicAdd(&hits, 1), "
                "__syncthreads(), and only then let one thread add it to *correct.")
    return None


def _one_atomic_per_block_hint(case, got, limit, metrics):
    return (f"your kernel made {got} atomics on *correct, about one per correct row; one per block is {limit}. "
            f"Every block's atomics on one address wait for each other: count the block's hits in shared memory "
            f"(__shared__ int hits; atomicAdd(&hits, 1)), then let one thread add them to *correct.")


register(Exercise(
    id="06.count_correct",
    title="Accuracy on the device: count the correct rows, one atomic per block",
    text="Training reads its accuracy once per epoch, so every batch adds its correct rows to a count that "
         "stays on the device. A row is correct when its largest logit (the first one, on ties, as np.argmax) "
         "is at its label. *correct already holds the hits of the epoch's earlier batches: add this batch's. "
         "One thread per row; count the block's hits in shared memory and add them to *correct with one "
         "atomicAdd per block, so that thousands of rows do not queue on one address. Threads past the "
         "batch count nothing, but still reach every __syncthreads(). The check counts, on the emulator (on a GPU "
         "too: the method is judged on the emulator), the lanes of global atomics and reductions: at most one a "
         "block.",
    kernel="count_correct", params=("correct", "logits", "labels", "rows", "classes"), outputs=("correct",),
    reference=count_correct_spec, cases=count_correct_cases,
    stub=r"""
// *correct += the number of rows b < rows whose largest logit (the first, on ties) is at labels[b];
// one thread per row, one atomicAdd on *correct per block.
__global__ void count_correct(int* correct, const float* logits, const int* labels, int rows, int classes) {
    // FILL ME IN (roughly 14 lines)
}
""",
    solution=r"""
__global__ void count_correct(int* correct, const float* logits, const int* labels, int rows, int classes) {
    __shared__ int hits;                          // this block's correct rows
    if (threadIdx.x == 0) hits = 0;
    __syncthreads();                              // zeroed before anyone adds to it
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < rows) {                               // no early return: every thread reaches both barriers
        const float* z = logits + b * classes;
        int best = 0;
        for (int j = 1; j < classes; ++j)
            if (z[j] > z[best]) best = j;         // strictly greater: the first maximum wins a tie
        if (best == labels[b]) atomicAdd(&hits, 1);
    }
    __syncthreads();                              // every hit counted before the total is read
    if (threadIdx.x == 0 && hits > 0)
        atomicAdd(correct, hits);                 // one atomic on global memory per block
}
""",
    launch=f"block = ({COUNT_BLOCK}, 1, 1), grid = (ceil_div(rows, {COUNT_BLOCK}), 1); labels are int32, correct "
           f"is one int32 updated in place",
    races=True, diagnose_small_outputs=True,
    diagnoses=(_count_restarted, _count_last_maximum, _count_one_per_block, _count_lost_hits),
    requirements=(Requirement(GLOBAL_ATOMICS, at_most=lambda case: math.prod(case.grid),
                              hint=_one_atomic_per_block_hint),),
))

# ---------------------------------------------------------------------------------------------
# 06.launches_per_epoch: what an epoch costs in launches, checked against the launches counted in real steps


@functools.lru_cache(maxsize=None)
def counted_step_launches(sizes, rows, backend_name):
    """The kernel launches of one SGD training step of ``nn.mlp(sizes)`` on a batch of ``rows``, counted by
    ``gpuedu.profile()`` on a real step (``backend_name`` keys the cache: each backend counts its own)."""
    from .. import backend, nn
    from ..profiler import profile
    ga = backend.active().gpuarray
    model = nn.mlp(list(sizes), seed=0)
    loss, optimizer = nn.SoftmaxCrossEntropy(), nn.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    xb = ga.to_gpu(rng.random((rows, sizes[0]), dtype=np.float32))
    yb = ga.to_gpu(rng.integers(0, sizes[-1], rows).astype(np.int32))
    with profile() as prof:
        model.backward(loss(model.forward(xb), yb))
        optimizer.step()
    return len(prof.kernels)


def launches_per_epoch_reference(sizes, n_train, batch_size):
    from .. import backend
    full, rest = divmod(n_train, batch_size)
    name = backend.active().name
    count = full * counted_step_launches(tuple(sizes), batch_size, name) if full else 0
    return count + (counted_step_launches(tuple(sizes), rest, name) if rest else 0)


def launches_per_epoch_cases(rng):
    yield "lesson 06's 64-128-10 network, 1,438 images, batches of 32", dict(sizes=[64, 128, 10], n_train=1438,
                                                                             batch_size=32)
    yield "one layer, 64-10 (logistic regression)", dict(sizes=[64, 10], n_train=1438, batch_size=32)
    yield "64-128-10, 100 images in batches of 32 (a partial last batch)", dict(sizes=[64, 128, 10], n_train=100,
                                                                                batch_size=32)
    yield "64-128-10, 1,438 images in batches of 128", dict(sizes=[64, 128, 10], n_train=1438, batch_size=128)
    yield "three layers, 64-32-32-10, 1,000 images in batches of 64", dict(sizes=[64, 32, 32, 10], n_train=1000,
                                                                           batch_size=64)
    depth = int(rng.integers(4, 7))
    widths = [int(w) for w in rng.choice([16, 32, 48, 64, 96], depth - 1)]
    n_train, batch = int(rng.integers(200, 2000)), int(rng.choice([16, 32, 64, 128]))
    if n_train % batch == 0:
        n_train += 1
    yield (f"{depth} layers, 64-{'-'.join(map(str, widths))}-10, {n_train} images in batches of {batch}",
           dict(sizes=[64, *widths, 10], n_train=n_train, batch_size=batch))


def _launch_mixups(kwargs, expected, got):
    sizes, n, batch = kwargs["sizes"], kwargs["n_train"], kwargs["batch_size"]
    layers = len(sizes) - 1
    steps = -(-n // batch)
    per_step = expected // steps if expected % steps == 0 else None
    if not isinstance(got, int) or per_step is None:
        return None
    if n % batch and got == per_step * (n // batch):
        return ("the last, partial batch is a step too: an epoch is ceil(n_train / batch_size) steps (the "
                "DataLoader keeps the short batch unless drop_last=True).")
    if got == per_step and steps > 1:
        return f"that is one step's launches; an epoch is ceil(n_train / batch_size) = {steps} steps."
    fused = "the activation is fused into the layer's forward GEMM (lesson 05): it is no launch of its own"
    if got == (per_step + 1) * steps:
        return ("one launch too many a step: the first layer's input is the data, whose gradient nobody needs, so "
                "its backward pass computes dW only (no GEMM for dX)" + (f"; or, if you gave the hidden layer's "
                                                                        f"activation a launch, {fused}" if layers == 2
                                                                        else "") + ".")
    if got == (per_step - layers) * steps:
        return ("the bias gradient takes two launches a layer: partial column sums (fused with the activation's "
                "gradient), then a fixed-order sum of those partials (lesson 05).")
    if got == (per_step + 2 * layers - 1) * steps:
        return ("one launch updates every parameter tensor (sgd_update_multi), not one launch per weight and bias "
                "tensor.")
    if got in ((per_step + layers - 1) * steps, (per_step + layers) * steps):
        return fused + "."
    return None


register(FunctionExercise(
    id="06.launches_per_epoch",
    title="What an epoch costs in launches",
    text="A network this small is launch-bound on a GPU: an epoch costs what its launches cost. Lesson 06's "
         "picture lists one step's kernels for the 64-128-10 network. Generalise it: return the number of kernel "
         "launches (an int) one epoch of SGD training of nn.mlp(sizes) makes on n_train images in batches of batch_size "
         "(forward, loss, backward and optimizer step of every batch; copies and reading the metrics are not "
         "launches), for batches of at most 128 rows: from 256 rows on, the weight gradient's GEMM splits its "
         "depth, the batch, into pieces and adds a launch per layer. To see a step's kernels, run one under "
         "gpuedu.profile() and print the profile.",
    function="launches_per_epoch",
    cases=launches_per_epoch_cases,
    reference=launches_per_epoch_reference,
    stub='''def launches_per_epoch(sizes, n_train, batch_size):
    """Kernel launches of one epoch of SGD training of nn.mlp(sizes) on n_train images in batches of batch_size."""
    layers = len(sizes) - 1
    # FILL ME IN (roughly 4 lines: the launches of one step, then the steps of an epoch)
''',
    solution='''def launches_per_epoch(sizes, n_train, batch_size):
    """Kernel launches of one epoch of SGD training of nn.mlp(sizes) on n_train images in batches of batch_size."""
    layers = len(sizes) - 1
    forward = layers                    # one GEMM per layer, bias and activation fused into it
    backward = 4 * layers - 1           # per layer: dZ with the bias's partial sums, their sum, the GEMM for dW,
                                        # and the GEMM for dX, except for the first layer
    per_step = forward + 1 + backward + 1       # + the fused loss, + one update for every tensor
    steps = -(-n_train // batch_size)   # the last, partial batch is a step too
    return per_step * steps
''',
    launch="launches_per_epoch(sizes, n_train, batch_size) is called for 6 networks and batch sizes and compared "
           "with the launches gpuedu.profile() counts in one real training step of each (and of its last, "
           "partial batch), times the steps of the epoch",
    diagnoses=(_launch_mixups,),
))
