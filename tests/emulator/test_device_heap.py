"""malloc, free, new and delete in kernels use the emulator's guarded device heap, not the host's.

An overrun of a block from the host's heap corrupted it and took the process down later; a block of the
device heap ends against an inaccessible page, so the overrun stops its launch with a message. The fatal-looking
cases run in a fresh process, which must survive and run a correct kernel afterwards.
"""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gpuedu.emulator import _module
from gpuedu.emulator import driver as drv
from gpuedu.emulator._scanner import rewrite_source
from gpuedu.emulator.compiler import SourceModule


def test_the_rewrite_sends_calls_and_expressions_to_the_device_heap_and_leaves_declarations():
    code = rewrite_source(textwrap.dedent("""\
        struct Pool { Pool(const Pool&) = delete; void* operator new(size_t); void free(int); void* malloc(size_t); };
        __global__ void k(Pool* pool) {
          float* p = (float*)malloc(16); std::free(p); void* q = ::malloc(4); free(q);
          int* a = new int[8]; Node* n = new Node(3); delete n; delete[] a; if (p) delete (n);
          pool->free(1); pool[0].malloc(2); void* r = new (q) int;  // placement new stays
          // a comment: malloc(1) and delete p; stay as written
        }
        """))
    lines = code.splitlines()
    assert lines[0].count("__gpuedu") == 0                       # declarations, `= delete`, `operator new`
    assert lines[2].count("__gpuedu::device_malloc(") == 2 and lines[2].count("__gpuedu::device_free(") == 2
    assert "new (__gpuedu::device_heap) int[8]" in lines[3] and "new (__gpuedu::device_heap) Node(3)" in lines[3]
    assert "__gpuedu::device_delete( n);" in lines[3] and "__gpuedu::device_delete_array( a);" in lines[3]
    assert "if (p) __gpuedu::device_delete( (n));" in lines[3]
    assert "__gpuedu" not in lines[4] and "__gpuedu" not in lines[5]
    assert len(lines) == 7                                        # every line stays where it was


HEAP = r"""
#include <cstdlib>
struct Counter {
  float* log; int value;
  __device__ Counter() : log(nullptr), value(0) {}       // what new Counter[n] builds each element with
  __device__ Counter(float* l, int v) : log(l), value(v) { atomicAdd(&log[0], 1.0f); }
  __device__ ~Counter() { atomicAdd(&log[1], 1.0f); }
};
extern "C" __global__ void blocks(float* out, int n) {
  float* mine = (float*)malloc(n * sizeof(float));
  if (!mine) { out[threadIdx.x] = -1.0f; return; }
  for (int i = 0; i < n; ++i) mine[i] = threadIdx.x + i;
  __syncthreads();                                  // blocks live on across a barrier (fibers)
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += mine[i];
  out[threadIdx.x] = s;
  free(mine);
}
extern "C" __global__ void objects(float* log, int n) {
  Counter* one = new Counter(log, 1);
  Counter* many = new Counter[0 + 0] ;             // an empty array is fine
  delete[] many;
  int* ints = new int[n];
  for (int i = 0; i < n; ++i) ints[i] = i;
  log[2] += ints[n - 1] + one->value;
  delete[] ints;
  delete one;
}
__device__ float* kept;
extern "C" __global__ void keep(int n) { kept = (float*)malloc(n * sizeof(float)); kept[n - 1] = 42.0f; }
extern "C" __global__ void use_kept(float* out, int n) { out[0] = kept[n - 1]; free(kept); }
extern "C" __global__ void hold(float* got, void** kept_blocks, int n) {
  void* p = malloc(n);                             // no barrier: the threads take turns
  got[threadIdx.x] = p != nullptr;
  kept_blocks[threadIdx.x] = p;
}
extern "C" __global__ void release(void** kept_blocks) { free(kept_blocks[threadIdx.x]); }
extern "C" __global__ void twice(int n) { void* p = malloc(n); free(p); free(p); }
extern "C" __global__ void inside(int n) { char* p = (char*)malloc(n); free(p + 1); }
"""


@pytest.fixture(scope="module")
def heap(context):
    return SourceModule(HEAP)


def test_each_thread_gets_its_own_block_that_lives_across_barriers(heap):
    out = np.zeros(64, np.float32)
    heap.get_function("blocks")(drv.Out(out), np.int32(10), block=(64, 1, 1))
    np.testing.assert_array_equal(out, [10 * t + 45 for t in range(64)])
    assert _module.HEAP.used == 0                          # every block was freed


def test_new_and_delete_run_constructors_and_destructors(heap):
    log = np.zeros(3, np.float32)
    heap.get_function("objects")(drv.InOut(log), np.int32(5), block=(4, 1, 1))
    assert log[0] == 4 and log[1] == 4                     # one object per thread, built and destroyed
    assert _module.HEAP.used == 0


def test_a_block_outlives_its_launch_until_freed(heap):
    n = 1000
    heap.get_function("keep")(np.int32(n), block=(1, 1, 1))
    assert _module.HEAP.used == n * 4
    out = np.zeros(1, np.float32)
    heap.get_function("use_kept")(drv.Out(out), np.int32(n), block=(1, 1, 1))
    assert out[0] == 42.0 and _module.HEAP.used == 0


def test_malloc_gives_null_past_the_heap_limit_as_on_a_gpu(heap, context):
    before = context.get_limit(drv.limit.MALLOC_HEAP_SIZE)
    context.set_limit(drv.limit.MALLOC_HEAP_SIZE, 64 * 40)    # room for 40 blocks of 64 bytes
    got = np.zeros(64, np.float32)
    kept = drv.mem_alloc(64 * 8)
    try:
        heap.get_function("hold")(drv.Out(got), kept, np.int32(64), block=(64, 1, 1))
        assert got.sum() == 40 and _module.HEAP.used == 64 * 40
    finally:
        heap.get_function("release")(kept, block=(64, 1, 1))   # free(NULL) is fine, as in C
        context.set_limit(drv.limit.MALLOC_HEAP_SIZE, before)
    assert _module.HEAP.used == 0


def test_a_negative_heap_limit_is_refused(context):
    with pytest.raises(drv.LogicError, match="MALLOC_HEAP_SIZE = -1 is negative"):
        context.set_limit(drv.limit.MALLOC_HEAP_SIZE, -1)


@pytest.mark.parametrize("name, message", [
    ("twice", "called free() (or delete) with 0x"),
    ("inside", "which is not the start of a live block from malloc()"),
])
def test_freeing_what_malloc_did_not_give_stops_the_launch(heap, name, message):
    with pytest.raises(drv.LaunchError, match=re.escape(message)) as caught:
        heap.get_function(name)(np.int32(8), block=(1, 1, 1))
    assert str(caught.value).startswith(f"kernel '{name}' thread (0,0,0) of block (0,0,0) called free()")


SCRIPT = textwrap.dedent(r'''
    import sys
    import numpy as np
    from gpuedu.emulator import driver as drv
    from gpuedu.emulator.compiler import SourceModule
    drv.init()
    ctx = drv.Device(0).make_context()
    bad = SourceModule(sys.argv[1]).get_function("bad")
    for attempt in range(2):   # the host's heap is intact: the same overrun is caught again
        try:
            bad(drv.Out(np.zeros(4, np.float32)), np.int32(int(sys.argv[2])), block=(4, 1, 1))
            print("NO ERROR")
        except drv.LaunchError as exc:
            print("LaunchError:", exc)
    good = SourceModule("__global__ void good(int* x) { x[threadIdx.x] = 7; }").get_function("good")
    out = np.zeros(4, np.int32)
    good(drv.Out(out), block=(4, 1, 1))
    print("afterwards:", out.tolist())
''')

OVERRUNS = {
    "malloc": ("__global__ void bad(float* x, int n) { float* p = (float*)malloc(16);"
               " for (int i = 0; i < n; ++i) p[i] = i; x[threadIdx.x] = p[0]; free(p); }", 5000,
               "wrote past the end of a 16-byte block from malloc() or new in device code (at byte offset 16, "
               "0 bytes past its end)"),
    "new": ("__global__ void bad(float* x, int n) { double* p = new double[3]; __syncthreads();"
            " for (int i = 0; i < n; ++i) p[i] = i; x[threadIdx.x] = p[0]; delete[] p; }", 5,
            "wrote past the end of a 24-byte block from malloc() or new in device code (at byte offset 32, "
            "8 bytes past its end)"),
    "read": ("__global__ void bad(float* x, int n) { float* p = (float*)malloc(40); p[0] = 1;"
             " x[threadIdx.x] = p[n]; free(p); }", 1030,
             "read past the end of a 40-byte block"),
}


@pytest.mark.parametrize("case", sorted(OVERRUNS))
def test_an_overrun_of_a_device_heap_block_stops_its_launch_not_the_process(case, tmp_path):
    source, n, message = OVERRUNS[case]
    env = dict(os.environ, GPUEDU_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", SCRIPT, source, str(n)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("LaunchError: kernel 'bad' thread (0,0,0) of block (0,0,0) " + message) == 2, \
        done.stdout
    assert "afterwards: [7, 7, 7, 7]" in done.stdout
