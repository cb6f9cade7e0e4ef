"""Exercises of lessons/03_parallel_patterns.ipynb: shared-memory reduction, warp shuffles, atomics.

The sums use small integers stored as float32: every partial sum is then exact whatever the order
of the additions, so a correct kernel matches NumPy bit for bit and any difference is a bug.
Right sums are not enough for the warp sum and the histogram: on the emulator their counters must
show the pattern the exercise teaches (one load per warp; counting in shared memory).
"""
import math

import numpy as np

from . import Case, Exercise, Requirement, ceil_div, register, sizes_1d
from ._exercise import global_reads
from ..profiler.metrics import SHUFFLES
from ._canary import is_sentinel

BLOCK = 256


def _small_ints(rng, n):
    return rng.integers(-8, 9, n).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# 03.block_sum: each block sums its 256 elements in shared memory


def block_sum_spec(x, n):
    blocks = ceil_div(n, BLOCK)
    padded = np.zeros(blocks * BLOCK, dtype=np.float64)  # the partial last block counts zeros
    padded[:n] = x
    return padded.reshape(blocks, BLOCK).sum(axis=1).astype(np.float32)


def block_sum_cases(rng):
    for label, n in sizes_1d(rng, BLOCK, large=20_000):
        yield Case(label, {"x": _small_ints(rng, n), "n": np.int32(n)},
                   block=(BLOCK, 1, 1), grid=(ceil_div(n, BLOCK), 1))


def _computed_nan(out):
    """NaNs the kernel computed (the canary that marks "never written" is a NaN too: not those)."""
    return np.isnan(out) & ~is_sentinel(out)


def _block_sum_nan(case, expected, got):
    if _computed_nan(got["out"]).any():
        return ("a block sum is NaN: threads past n read x[i] beyond the array. Load 0 for them "
                "(`partial[tid] = (i < n) ? x[i] : 0.0f;`), they still take part in the tree.")
    return None


def _block_sum_stopped_early(case, expected, got):
    n = int(case.inputs["n"])
    x = np.zeros(ceil_div(n, BLOCK) * BLOCK)
    x[:n] = case.inputs["x"]
    tree = x.reshape(-1, BLOCK)
    # A tree that stops at s = 2 leaves the even-indexed elements' sum in partial[0].
    if np.array_equal(got["out"], tree[:, 0::2].sum(axis=1).astype(np.float32)):
        return ("each result is the sum of the even-indexed elements only: the tree stopped one step "
                "early. Loop while s > 0 (s = 128, 64, ..., 1), not while s > 1.")
    return None


def _block_sum_unordered(case, expected, got):
    # Tried last: no simpler pattern explained the values. Sums that are off by amounts that no
    # indexing mistake explains come from reading a partial sum before its owner wrote it.
    if not np.isnan(got["out"]).any():   # no NaN: neither computed nor left unwritten
        return ("the block sums are wrong by amounts no indexing pattern explains: most likely a "
                "thread reads partial[tid + s] before its owner has added into it. Every level of the "
                "tree needs __syncthreads() after it (and one after the load), outside the `if`, so "
                "that all threads reach it.")
    return None


BLOCK_SUM_STUB = r"""
// out[b] = x[256 b] + x[256 b + 1] + ... + x[256 b + 255] (elements past n count as 0).
// One block of 256 threads per output; the tree runs in shared memory.
__global__ void block_sum(float* out, const float* x, int n) {
    __shared__ float partial[256];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    // FILL ME IN (roughly 8 lines): load, wait, halve the active threads each step, write
}
"""

BLOCK_SUM_SOLUTION = r"""
__global__ void block_sum(float* out, const float* x, int n) {
    __shared__ float partial[256];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    partial[tid] = (i < n) ? x[i] : 0.0f;   // past n: the identity of +, and no read out of bounds
    __syncthreads();                         // every load lands before anyone reads a neighbour's
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (tid < s)
            partial[tid] += partial[tid + s];
        __syncthreads();                     // this level is complete before the next reads it
    }
    if (tid == 0)
        out[blockIdx.x] = partial[0];
}
"""

LOAD_REQUESTS = global_reads("requests")   # loads (local ones too), and atomics and reductions, which read too
SHARED_READS = ("smsp__sass_inst_executed_op_shared_ld.sum", "smsp__sass_inst_executed_op_shared_atom.sum")
SHARED_WRITES = ("smsp__sass_inst_executed_op_shared_st.sum", "smsp__sass_inst_executed_op_shared_atom.sum")


def _warps_launched(case):
    """One global load request per warp: its 32 lanes load their 32 floats with one instruction."""
    return math.prod(case.grid) * math.prod(case.block) // 32


def tree_shared_reads(case):
    """The most shared-memory read instructions a tree over each block's 256 values takes: at each of its
    log2(256) = 8 levels every warp with an adding lane reads two partial sums (its own and its partner's), with
    one instruction each, and one thread reads the block's sum at the end. Sequential addressing (the solution, or
    its last warp unrolled) takes 25 a block; interleaved addressing (tid % (2 s) == 0), whose adding lanes spread
    over every warp, 95; the bound, every warp at every level, 2 * 8 * 8 + 1 = 129. One thread summing the block
    in a loop takes one per element: 256."""
    levels = int(math.log2(BLOCK))
    return (2 * levels * (BLOCK // 32) + 1) * math.prod(case.grid)


def _block_sum_serial_hint(case, got, limit, metrics):
    return (f"your kernel made {got} shared-memory read instructions (loads and atomics); a tree over each "
            f"block's 256 values makes at most {limit} here (two a warp at each of the 8 levels, and one for the "
            f"result): a loop in which one thread adds the block's values one after another makes one for every "
            f"value. Let half the threads add at each level (s = 128, 64, ..., 1), with __syncthreads() between.")


BLOCK_SUM_TREE = (
    Requirement(LOAD_REQUESTS, at_most=_warps_launched,
                hint="your kernel issued {got} global read requests (loads, atomics and reductions); each thread "
                     "loading its own x[i] issues {limit} here, one a warp: a thread that reads other threads' "
                     "elements from global memory (a loop over the block in thread 0, say) issues one per element. "
                     "Every thread loads one value into partial[tid]; the tree adds them in shared memory."),
    Requirement(SHARED_WRITES, at_least=_warps_launched,
                hint="your kernel made {got} shared-memory store instructions (stores and atomics), fewer than the "
                     "{limit} of every warp storing its 32 loaded values into partial[]: the sum must go through "
                     "shared memory, partial[tid] = (i < n) ? x[i] : 0.0f, then the tree."),
    Requirement(SHARED_READS, at_most=tree_shared_reads, hint=_block_sum_serial_hint),
)

register(Exercise(
    id="03.block_sum",
    title="Sum each block's elements in shared memory",
    text="The heart of every reduction: 256 threads load 256 values into shared memory, then add "
         "them pairwise in a tree, halving the number of active threads each step (128 add, then "
         "64, ..., then 1), until partial[0] holds the block's sum. Two things make it correct: "
         "threads past n must still take part (load 0), and no thread may read a neighbour's value "
         "before the neighbour wrote it (__syncthreads() after the load and after every level). The check "
         "counts, on the emulator (on a GPU too: the method is judged on the emulator), global read requests "
         "(loads, atomics and reductions: at most one a warp, each thread loading its own element), shared-"
         "memory store instructions (at least one a warp) and shared-memory read instructions (loads and "
         "atomics: at most what a tree takes, two a warp at each of the 8 levels and one for the result, 129 a "
         "block, where one thread adding the block's 256 values in a loop makes 256).",
    kernel="block_sum", params=("out", "x", "n"), outputs=("out",),
    reference=block_sum_spec, cases=block_sum_cases, stub=BLOCK_SUM_STUB, solution=BLOCK_SUM_SOLUTION,
    launch=f"block = ({BLOCK}, 1, 1), grid = (ceil_div(n, {BLOCK}), 1); out has one float per block",
    races=True,
    diagnoses=(_block_sum_nan, _block_sum_stopped_early, _block_sum_unordered),
    requirements=BLOCK_SUM_TREE,
))

# ---------------------------------------------------------------------------------------------
# 03.warp_sum: 32 lanes add their values with __shfl_down_sync, no shared memory

WARP_BLOCK = 128


def warp_sum_spec(x, n):
    warps = ceil_div(n, 32)
    padded = np.zeros(warps * 32, dtype=np.float64)
    padded[:n] = x
    return padded.reshape(warps, 32).sum(axis=1).astype(np.float32)


def warp_sum_cases(rng):
    for label, n in [("n = 1", 1), ("n = 32 (one warp)", 32), ("n = 33", 33),
                     ("n = 200 (the last block has empty warps)", 200),
                     (f"n = {WARP_BLOCK * 5 + 77}", WARP_BLOCK * 5 + 77), ("n = 10001 (large)", 10001)]:
        yield Case(label, {"x": _small_ints(rng, n), "n": np.int32(n)},
                   block=(WARP_BLOCK, 1, 1), grid=(ceil_div(n, WARP_BLOCK), 1))


def _warp_sum_shuffle_steps(case, expected, got):
    n = int(case.inputs["n"])
    x = np.zeros(ceil_div(n, 32) * 32)
    x[:n] = case.inputs["x"]
    lanes = x.reshape(-1, 32)
    if np.array_equal(got["out"], lanes[:, 0].astype(np.float32)):
        return ("out holds lane 0's own value: add what the shuffle returns, "
                "v += __shfl_down_sync(0xffffffff, v, offset).")
    if np.array_equal(got["out"], lanes[:, 0::2].sum(axis=1).astype(np.float32)):
        return "out holds the even lanes' sum: the last step, offset = 1, is missing (loop while offset > 0)."
    if np.array_equal(got["out"], lanes[:, :16].sum(axis=1).astype(np.float32)):
        return "out holds the first 16 lanes' sum: start the shuffles at offset 16 = 32 / 2."
    return None


WARP_SUM_ONE_LOAD_PER_WARP = Requirement(
    LOAD_REQUESTS, at_most=_warps_launched,
    hint="your kernel issued {got} global read requests (loads, local loads, atomics and reductions); one load per lane "
         "issues at most {limit} here, one per warp, since the 32 lanes load their 32 consecutive "
         "floats with one instruction. Let every lane load its own x[i] and the shuffles add them; "
         "a lane that loops over the warp's values issues a request per value.")

SHARED_ACCESSES = ("smsp__sass_inst_executed_op_shared_ld.sum", "smsp__sass_inst_executed_op_shared_st.sum",
                   "smsp__sass_inst_executed_op_shared_atom.sum")


def _shuffle_rounds(case):
    """log2(32) = 5 shuffles for every warp that has an output (a warp wholly past n may skip them)."""
    return 5 * ceil_div(int(case.inputs["n"]), 32)


WARP_SUM_SHUFFLES = (
    Requirement(SHUFFLES, at_least=_shuffle_rounds,
                hint="your kernel made {got} warp shuffles (" + SHUFFLES + "); adding at offsets 16, 8, 4, 2, 1 "
                     "takes 5 for each warp with an output, {limit} here: v += __shfl_down_sync(0xffffffffu, v, "
                     "offset) with offset = 16, 8, 4, 2, 1."),
    Requirement(SHARED_ACCESSES, at_most=lambda case: 0,
                hint="your kernel made {got} shared-memory instructions (loads, stores and atomics); this exercise "
                     "is the reduction without shared memory: the lanes exchange their values with "
                     "__shfl_down_sync, register to register, and no __shared__ array is needed."),
)

WARP_SUM_STUB = r"""
// out[w] = x[32 w] + ... + x[32 w + 31] (past n count as 0), one warp per output, no shared memory.
__global__ void warp_sum(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % 32;
    int warp = i / 32;                       // this warp's output index
    // FILL ME IN (roughly 6 lines): load (0 past n), shuffle down 16, 8, 4, 2, 1, lane 0 writes
}
"""

WARP_SUM_SOLUTION = r"""
__global__ void warp_sum(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % 32;
    int warp = i / 32;
    // No early return: all 32 lanes named by the mask must reach every shuffle.
    float v = (i < n) ? x[i] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2)
        v += __shfl_down_sync(0xffffffffu, v, offset);   // lane l adds lane l + offset's value
    if (lane == 0 && warp * 32 < n)                      // warps wholly past n have no output
        out[warp] = v;
}
"""

register(Exercise(
    id="03.warp_sum",
    title="A warp-shuffle reduction",
    text="The 32 threads of a warp can read each other's registers: __shfl_down_sync(mask, v, d) "
         "returns v from lane (lane + d). Adding it at d = 16, 8, 4, 2, 1 leaves the warp's sum in "
         "lane 0, with no shared memory and no __syncthreads. Every lane named in the mask must "
         "execute the shuffle, so lanes past n load 0 instead of returning early; and a warp that "
         "lies wholly past n must not write (out has ceil_div(n, 32) elements). The check counts, on the "
         "emulator (on a GPU too: the method is judged on the emulator), global read requests (loads, atomics "
         "and reductions: at most one a warp), shuffles (at least 5 for each warp with an output) and shared-"
         "memory loads, stores and atomics (none).",
    kernel="warp_sum", params=("out", "x", "n"), outputs=("out",),
    reference=warp_sum_spec, cases=warp_sum_cases, stub=WARP_SUM_STUB, solution=WARP_SUM_SOLUTION,
    launch=f"block = ({WARP_BLOCK}, 1, 1), grid = (ceil_div(n, {WARP_BLOCK}), 1); out has ceil_div(n, 32) floats",
    diagnoses=(_warp_sum_shuffle_steps,),
    requirements=(WARP_SUM_ONE_LOAD_PER_WARP,) + WARP_SUM_SHUFFLES,
))

# ---------------------------------------------------------------------------------------------
# 03.histogram: a 256-bin histogram of bytes, private per block in shared memory, then atomics

BINS = 256


def histogram_spec(hist, x, n):
    return hist + np.bincount(x.astype(np.int64), minlength=BINS).astype(np.uint32)


def histogram_cases(rng):
    for label, n in sizes_1d(rng, BINS, large=30_000):
        if "large" in label:   # a skewed image: most pixels dark, so a few bins collide a lot
            x = np.minimum(rng.exponential(12.0, n), 255).astype(np.uint8)
        else:
            x = rng.integers(0, 256, n).astype(np.uint8)
        yield Case(label, {"hist": np.zeros(BINS, np.uint32), "x": x, "n": np.int32(n)},
                   block=(BINS, 1, 1), grid=(ceil_div(n, BINS), 1))


def _histogram_extra_counts(case, expected, got):
    extra = got["hist"].astype(np.int64) - expected["hist"].astype(np.int64)
    n = int(case.inputs["n"])
    if extra.sum() > 0 and n % BINS:
        return (f"the histogram counts {extra.sum()} more values than there are: threads past n "
                f"counted bytes beyond the array. Guard the count with `if (i < n)`, but keep those "
                f"threads for zeroing and merging the bins (and for the barriers).")
    return None


def _histogram_nothing_counted(case, expected, got):
    if np.array_equal(got["hist"], case.inputs["hist"]):
        return ("hist is unchanged: nothing reached it. Count each x[i] into the block's bins with "
                "atomicAdd(&local[x[i]], 1u), then add every bin to hist with atomicAdd(&hist[b], local[b]).")
    return None


def _histogram_lost_counts(case, expected, got):
    if got["hist"].sum() < expected["hist"].sum():
        return ("counts are missing: either several threads added to one bin without atomicAdd, "
                "or a bin was zeroed or merged while others were still counting into it: "
                "__syncthreads() after zeroing the block's bins and before merging them.")
    return None


SHARED_ATOMICS = "smsp__sass_thread_inst_executed_op_shared_atom.sum"
# Global atomics whose result is read (ATOM) and whose result is discarded (RED, as atomicAdd(&h, v); is).
GLOBAL_ATOMICS = ("smsp__sass_thread_inst_executed_op_global_atom.sum",
                  "smsp__sass_thread_inst_executed_op_global_red.sum")


def _histogram_counts_in_shared(case, got, limit, metrics):
    return (f"{got} of the n = {limit} values were counted with an atomic on shared memory "
            f"({SHARED_ATOMICS}), and your kernel made {sum(metrics[m] for m in GLOBAL_ATOMICS)} atomics on "
            f"global memory ({' + '.join(GLOBAL_ATOMICS)}): count every x[i] into the block's own bins, "
            f"atomicAdd(&local[x[i]], 1u), so that only the merge, at most one atomic per bin and "
            f"block, reaches the global histogram that every block fights over.")


GLOBAL_ATOMIC_SECTORS = ("l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum",
                         "l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum")


def merge_sectors(case):
    """The most global atomic sectors a merge of each block's bins takes: its 8 warps add 32 neighbouring bins each,
    128 bytes: 4 sectors, 5 where hist does not start on a 128-byte boundary; 40 a block. Counting each x[i]
    straight into hist, a warp's atomics land on bins all over the histogram: up to 32 sectors a warp."""
    return (BINS // 32) * 5 * math.prod(case.grid)


HISTOGRAM_PRIVATE_BINS = (
    Requirement(SHARED_ATOMICS, at_least=lambda case: int(case.inputs["n"]), hint=_histogram_counts_in_shared),
    Requirement(GLOBAL_ATOMIC_SECTORS, at_most=merge_sectors,
                hint="your kernel's atomics on global memory touched {got} sectors (" + " + ".join(GLOBAL_ATOMIC_SECTORS)
                     + "); merging each block's bins, warp w adding bins 32 w to 32 w + 31, touches at most {limit} "
                     "here: atomics on hist[x[i]] scatter a warp over the whole histogram. Count into the block's "
                     "shared bins only, and let thread b add bin b to hist at the end."),
    Requirement(GLOBAL_ATOMICS, at_most=lambda case: BINS * math.prod(case.grid),
                hint="your kernel made {got} atomics on global memory (" + " + ".join(GLOBAL_ATOMICS) + "); merging "
                     "each block's bins takes at most {limit} here, one per bin and block: count into "
                     "shared memory, and add each of the block's bins to hist once, at the end."),
)

HISTOGRAM_STUB = r"""
// hist[b] += number of i < n with x[i] == b, for the 256 byte values b.
// Each block first counts into its own 256 bins in shared memory (fast atomics, little contention
// on the global bins), then adds them to hist with one atomicAdd per bin.
__global__ void histogram(unsigned int* hist, const unsigned char* x, int n) {
    __shared__ unsigned int local[256];
    int tid = threadIdx.x;                   // blockDim.x == 256: one bin per thread
    int i = blockIdx.x * blockDim.x + tid;
    // FILL ME IN (roughly 7 lines): zero local, wait, count x[i], wait, merge into hist
}
"""

HISTOGRAM_SOLUTION = r"""
__global__ void histogram(unsigned int* hist, const unsigned char* x, int n) {
    __shared__ unsigned int local[256];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    local[tid] = 0;                          // shared memory starts with garbage
    __syncthreads();                         // all bins are zero before anyone counts
    if (i < n)
        atomicAdd(&local[x[i]], 1u);         // threads of the block may hit the same bin
    __syncthreads();                         // all counts are in before the merge reads them
    if (local[tid] > 0)
        atomicAdd(&hist[tid], local[tid]);   // other blocks add to the same global bins
}
"""

register(Exercise(
    id="03.histogram",
    title="A histogram with atomics, privatised in shared memory",
    text="Many threads may add to the same bin at once; a plain `++` is a read-modify-write that "
         "loses counts when two threads interleave, so use atomicAdd. Counting straight into the "
         "global histogram makes every block fight over 256 addresses; each block instead keeps its "
         "own 256 bins in shared memory and merges them once at the end. (The emulator runs a "
         "block's threads one after another between barriers, so a `++` among them loses no counts, "
         "though it would on a GPU; the check's racecheck names the two threads that race instead.) The check "
         "counts, on the emulator (on a GPU too: the method is judged on the emulator), shared-memory atomics (at "
         "least one for each of the n values), the global atomics' lanes (at most one a bin and block) and the "
         "sectors they touch (at most 5 for each of a block's 8 merging warps).",
    kernel="histogram", params=("hist", "x", "n"), outputs=("hist",),
    reference=histogram_spec, cases=histogram_cases, stub=HISTOGRAM_STUB, solution=HISTOGRAM_SOLUTION,
    launch=f"block = ({BINS}, 1, 1), grid = (ceil_div(n, {BINS}), 1); hist: 256 uint32 starting at 0",
    races=True,
    diagnoses=(_histogram_nothing_counted, _histogram_extra_counts, _histogram_lost_counts),
    requirements=HISTOGRAM_PRIVATE_BINS,
))
