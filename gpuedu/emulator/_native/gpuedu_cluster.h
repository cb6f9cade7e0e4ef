// gpuedu_cluster.h: Hopper's thread-block clusters, part of the emulator's runtime (included by gpuedu_runtime.h,
// before the grid loop).
//
// A kernel declared with __cluster_dims__(x, y, z) runs its grid as clusters of x*y*z blocks that a GPU places on
// the SMs of one GPC at once: each block reads and writes the others' shared memory (distributed shared memory:
// cooperative_groups' map_shared_rank, PTX's mapa and ld/st.shared::cluster), arrives on their mbarriers, and all
// the cluster's threads meet at barrier.cluster (cluster.sync()). The emulator runs a cluster's blocks together
// on one worker: each block keeps a worker state of its own (its fibers, stacks, shared memory and mbarriers;
// worker states 0 to x*y*z-1, which no other worker uses in such a launch), and the cluster's loop (run_clusters)
// runs each block's ready threads in turn, switching the running worker state between them, until every thread
// of the cluster has exited. A block whose threads all wait (at barrier.cluster, or at an mbarrier a block of the
// cluster completes) waits for the others; when no thread of the cluster can run, the launch stops with a
// deadlock report that names the barrier and who has not arrived.
//
// barrier.cluster has the PTX ISA's split form: arrive, then wait, which returns once every non-exited thread of
// the cluster has arrived in the same phase. A launch without clusters is a cluster of one block (as on a GPU), so
// the same barrier and %cluster_ctarank work there too, on each worker's own ClusterBarrier.
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#ifndef GPUEDU_SCAN
namespace __gpuedu {

constexpr unsigned MAX_CLUSTER = 8;   // blocks in a cluster: the portable most (16 needs a non-portable opt-in)

// barrier.cluster's state: the cluster's threads, which have arrived in the open phase, and which wait.
struct ClusterBarrier {
  unsigned size;              // blocks in the cluster
  Worker* rank[MAX_CLUSTER];  // each block's worker state
  unsigned live;              // the cluster's threads that have not exited
  unsigned arrived;           // ... that arrived in the open phase
  unsigned waiting;           // ... suspended in barrier.cluster.wait
  unsigned long long phase;   // phases completed
  int arrive_line, wait_line; // where the open phase's first arrival and the last wait were (a report names them)
  // By block and thread: 1 + the phase the thread arrived in, 0 if it has no arrival waiting for its wait.
  unsigned long long pending[MAX_CLUSTER][MAX_THREADS];
};

// The running cluster of a cluster launch (which runs on one worker, one cluster at a time; G holds their shape).
GPUEDU_HIDDEN ClusterBarrier launch_cluster;

inline Runtime& rank_state(unsigned k) { return R.cluster->rank[k]->r; }

// The running worker state becomes block `k` of the cluster's (only between fibers, from the cluster's loop, or
// for the length of one instruction that reaches another block: an arrival on its mbarrier, a multicast).
// (In a profiled build the module's code sees the thread's pointer as const, a value it may read once and keep: so the
// state after a switch is read only in functions called after it, never in the one that switched; hence the
// cluster loop's steps below are functions of their own.)
__attribute__((noinline)) inline void switch_rank(unsigned k) {
  *const_cast<WorkerHead**>(&__gpuedu_worker) = (WorkerHead*)launch_cluster.rank[k];
}

// Before a block (without clusters) or a cluster: the barrier starts at its first phase, every thread live.
inline void cluster_barrier_reset(ClusterBarrier& c, unsigned threads) {
  if (c.phase || c.arrived || c.waiting)
    for (unsigned k = 0; k < c.size; ++k) memset(c.pending[k], 0, sizeof c.pending[k]);
  c.live = threads;
  c.arrived = c.waiting = 0;
  c.phase = 0;
  c.arrive_line = c.wait_line = 0;
}

// This worker's barrier for a launch without clusters (a cluster of one block), made when first used.
inline ClusterBarrier& own_cluster() {
  Runtime& r = R;
  if (!r.own_cluster) {
    r.own_cluster = (ClusterBarrier*)calloc(1, sizeof(ClusterBarrier));
    if (!r.own_cluster) fail(DEVICE_MISUSE, "ran barrier.cluster: no memory for the cluster barrier's state");
    r.own_cluster->size = 1;
    r.own_cluster->rank[0] = &worker();
  }
  if (!r.cluster) {   // (first used in this block: its threads that exited already are not waited for)
    r.cluster = r.own_cluster;
    cluster_barrier_reset(*r.cluster, r.nthreads - r.n_done);
  }
  return *r.cluster;
}

// The open phase completes: its waiting threads, in every block of the cluster, are made ready.
GPUEDU_PROF_QUIET inline void cluster_phase_done(ClusterBarrier& c) {
  GPUEDU_PROF(cluster_barrier_released((void* const*)c.rank, c.size));   // (racecheck: every block is past it)
  c.phase++;
  c.arrived = 0;
  c.arrive_line = 0;
  for (unsigned k = 0; k < c.size && c.waiting; ++k) {
    Runtime& r = c.rank[k]->r;
    for (unsigned t = 0; t < r.nthreads; ++t)
      if (r.state[t] == AT_CLUSTER) {
        r.state[t] = READY;
        r.n_ready++;
        c.waiting--;
      }
  }
}

GPUEDU_PROF_QUIET inline void cluster_arrive(int line) {
  if (!R.fiber_mode) fail_loop_mode("barrier.cluster.arrive");
  ClusterBarrier& c = R.cluster ? *R.cluster : own_cluster();
  unsigned long long& mine = c.pending[R.cluster_rank][R.cur];
  if (mine)
    fail(DEVICE_MISUSE,
         "ran barrier.cluster.arrive (line %d) a second time without barrier.cluster.wait in between: each thread "
         "arrives once, then waits, before it arrives again (undefined on a GPU)", line);
  mine = c.phase + 1;
  if (!c.arrived) c.arrive_line = line;
  if (++c.arrived == c.live) cluster_phase_done(c);
}

GPUEDU_PROF_QUIET inline void cluster_wait(int line) {
  if (!R.fiber_mode) fail_loop_mode("barrier.cluster.wait");
  ClusterBarrier& c = R.cluster ? *R.cluster : own_cluster();
  Runtime& r = R;
  unsigned long long& mine = c.pending[r.cluster_rank][r.cur];
  if (!mine)
    fail(DEVICE_MISUSE,
         "ran barrier.cluster.wait (line %d) without barrier.cluster.arrive before it: a thread waits for the phase "
         "it arrived in (cluster.sync() does both; barrier_arrive() then barrier_wait() split them)", line);
  c.wait_line = line;
  while (c.phase < mine) {   // (the phase it arrived in has not completed)
    r.state[r.cur] = AT_CLUSTER;
    r.n_ready--;
    c.waiting++;
    run_next();
  }
  mine = 0;
}

// A thread of a cluster exited: the open phase no longer waits for it (the PTX ISA's barrier.cluster waits for the
// cluster's non-exited threads).
GPUEDU_PROF_QUIET inline void cluster_thread_exited() {
  ClusterBarrier& c = *R.cluster;
  unsigned long long& mine = c.pending[R.cluster_rank][R.cur];
  if (mine == c.phase + 1) c.arrived--;
  mine = 0;
  c.live--;
  if (c.arrived && c.arrived == c.live) cluster_phase_done(c);
}

// Threads of the running block's cluster suspended at barrier.cluster.wait.
inline unsigned cluster_waiting() { return R.cluster ? R.cluster->waiting : 0; }

// No thread of the cluster can run, and some wait at barrier.cluster: name the barrier and who has not arrived.
// (Thread `t` of the running block, block rank `k`, has not.)
[[noreturn]] __attribute__((noinline)) inline void fail_not_arrived(ClusterBarrier& c, unsigned k, unsigned t) {
  Runtime& r = R;
  __gpuedu_threadIdx = r.fibers[t].tid;
  const char* where = r.state[t] == AT_BLOCK ? "waits at __syncthreads()"
                      : r.state[t] == AT_WARP ? "waits at a warp intrinsic"
                      : r.state[t] == AT_MBARRIER ? "waits on an mbarrier"
                      : r.state[t] == AT_CLUSTER ? "waits at barrier.cluster.wait for an earlier phase"
                      : "cannot run";
  fail(DEADLOCK,
       "deadlock at barrier.cluster (cluster.sync()): %u of the cluster's %u live threads arrived (first at line "
       "%d) and %u wait (line %d); this thread (block rank %u of the cluster) has not arrived and %s. Every "
       "thread of every block of the cluster that has not exited must arrive (look for an if around "
       "cluster.sync() that not every thread takes)",
       c.arrived, c.live, c.arrive_line, c.waiting, c.wait_line, k, where);
}

[[noreturn]] inline void report_cluster_deadlock() {
  ClusterBarrier& c = *R.cluster;
  for (unsigned k = 0; k < c.size; ++k) {
    Runtime& r = c.rank[k]->r;
    for (unsigned t = 0; t < r.nthreads; ++t) {
      if (r.state[t] == DONE || c.pending[k][t] == c.phase + 1) continue;
      if (c.size > 1) switch_rank(k);
      fail_not_arrived(c, k, t);
    }
  }
  fail(DEADLOCK, "deadlock at barrier.cluster: %u threads wait and none of the cluster's threads can run", c.waiting);
}

}  // namespace __gpuedu
#endif  // GPUEDU_SCAN

#ifndef GPUEDU_SCAN
namespace __gpuedu {

// The grid loop's part for a cluster launch (run_grid): the worker states of the cluster's other blocks, prepared
// once per launch from the launching worker's (which is rank 0's). Each step that reads the running block's state
// is a function called after the switch to it (switch_rank says why).
inline bool attach_worker(int w);             // (gpuedu_launch.h)
inline bool set_up_worker(int w);
__attribute__((noinline)) inline void set_up_rank(unsigned k, const Runtime* from) {
  if (!set_up_worker((int)k)) fail(DEVICE_MISUSE, "could not run a cluster of %u blocks: %s", G.cluster_size,
                                   E_launch.message);
  take_launch(from);
  R.fiber_mode = true;
  R.cluster = &launch_cluster;
  R.cluster_rank = k;
  launch_cluster.rank[k] = &worker();
}
inline void enter_rank(unsigned k, const Runtime* from) {
  if (!attach_worker((int)k)) {
    switch_rank(0);
    fail(DEVICE_MISUSE, "could not run a cluster of %u blocks: %s", G.cluster_size, E_launch.message);
  }
  set_up_rank(k, from);
}

// The running block starts as block `b` of the grid.
__attribute__((noinline)) inline void begin_rank_block(uint3 b) {
  begin_block(b, ((unsigned long long)b.z * gridDim.y + b.y) * gridDim.x + b.x);
  prepare_block_fibers();
}

// The running block's ready threads run until none can: 0 every thread has exited, 1 some ran, 2 none could.
__attribute__((noinline)) inline int run_rank() {
  Runtime& r = R;
  if (r.n_done == r.nthreads) return 0;
  if (!r.n_ready) return 2;
  unsigned p = 0;
  while (r.state[r.order[p]] != READY) ++p;
  resume(p, nullptr);   // back once none of this block's threads can run (or all have exited)
  return 1;
}

// Pollers of the running block's mbarriers made ready, or its TMA loads landed: whether some thread can run now.
__attribute__((noinline)) inline bool wake_rank() {
  return R.mbar_used && R.n_done != R.nthreads && wake_mbarrier_pollers();
}

// The running block is stuck for good: its report (of its mbarriers, warps or barrier).
[[noreturn]] __attribute__((noinline)) inline void report_rank() {
  report_deadlock();
  __builtin_unreachable();
}

__attribute__((noinline)) inline void end_rank_block(bool final) {
  if (!final) GPUEDU_PROF(block_end());
  check_watches(final);
}

// Each cluster of the grid in turn (x fastest), its blocks' threads run together until all have exited.
inline void run_clusters() {
  ClusterBarrier& c = launch_cluster;
  const unsigned* d = G.cluster;
  const unsigned gx = gridDim.x / d[0], gy = gridDim.y / d[1];
  const unsigned long long clusters = G.blocks / c.size;
  const unsigned threads = c.rank[0]->r.nthreads;
  for (unsigned long long id = 0; id < clusters; ++id) {
    if (G.stop_reason == TIMEOUT || G.stop_reason == INTERRUPT) fail(G.stop_reason, "stopped");
    unsigned cx = (unsigned)(id % gx), cy = (unsigned)(id / gx % gy), cz = (unsigned)(id / gx / gy);
    cluster_barrier_reset(c, c.size * threads);
    for (unsigned k = 0; k < c.size; ++k) {
      switch_rank(k);
      begin_rank_block(uint3{cx * d[0] + k % d[0], cy * d[1] + k / d[0] % d[1], cz * d[2] + k / (d[0] * d[1])});
    }
    for (;;) {
      bool ran = false, running = false;
      for (unsigned k = 0; k < c.size; ++k) {
        switch_rank(k);
        int step = run_rank();
        running |= step != 0;
        ran |= step == 1;
      }
      if (!running) break;
      if (ran) continue;
      // No thread of the cluster can run: pollers made ready, or TMA copies landed, let some run on; else none
      // ever will.
      bool woke = false;
      for (unsigned k = 0; k < c.size; ++k) {
        switch_rank(k);
        woke |= wake_rank();
      }
      if (woke) continue;
      if (c.waiting) report_cluster_deadlock();
      for (unsigned k = 0; k < c.size; ++k)
        if (c.rank[k]->r.n_done != c.rank[k]->r.nthreads) {
          switch_rank(k);
          report_rank();
        }
    }
    for (unsigned k = 0; k < c.size; ++k) {
      switch_rank(k);
      end_rank_block(false);
    }
    switch_rank(0);   // (the launch's state between clusters, where a stop fails: run_grid's)
  }
  for (unsigned k = 1; k < c.size; ++k) {
    switch_rank(k);
    end_rank_block(true);
  }
  switch_rank(0);
}

// A cluster's block's fibers prepared (run_grid's `prepare`, for its kernel) and its watches filled, in its worker
// state (after the switch to it: see switch_rank).
__attribute__((noinline)) inline void set_up_rank_fibers(void (*prepare)(void*), void* kernel) {
  prepare(kernel);
  fill_watches();
}

// run_grid's part for a cluster launch, once its own worker state (rank 0's) is ready; not a template, so that each
// kernel of a module compiles none of it.
__attribute__((noinline)) inline void run_cluster_launch(void (*prepare)(void*), void* kernel) {
  if (module_shares_shared_memory())
    fail(DEVICE_MISUSE, "a kernel declared with __cluster_dims__ must keep its __shared__ variables inside functions "
         "(or in extern __shared__ memory): a __shared__ variable declared at file scope is one for the whole module "
         "in the emulator, and each block of a cluster needs its own");
  launch_cluster.size = G.cluster_size;
  launch_cluster.rank[0] = &worker();
  R.cluster = &launch_cluster;
  const Runtime* first = &R;
  for (unsigned k = 1; k < G.cluster_size; ++k) {
    enter_rank(k, first);
    set_up_rank_fibers(prepare, kernel);
  }
  switch_rank(0);
  run_clusters();
  check_watches(true);
}

// After a cluster launch (whichever way it ended): the launching worker's state is the running one again, and the
// other blocks' states stop counting.
__attribute__((noinline)) inline void stop_counting() { GPUEDU_PROF(worker_end()); }
inline void leave_cluster_launch() {
  for (unsigned k = 1; k < launch_cluster.size; ++k) {
    switch_rank(k);
    stop_counting();
  }
  if (launch_cluster.size > 1) switch_rank(0);
  launch_cluster.size = 0;
}

// ---- what a thread asks of its cluster -------------------------------------------------------------------
// (A launch without clusters is a cluster of one block: rank 0 of 1, its cluster the block.)
inline unsigned cluster_size() { return G.cluster_size; }
inline unsigned cluster_rank() { return G.cluster_size > 1 ? R.cluster_rank : 0; }
inline uint3 cluster_dims() { return uint3{G.cluster[0], G.cluster[1], G.cluster[2]}; }
inline uint3 cluster_block_index() {
  return uint3{blockIdx.x % G.cluster[0], blockIdx.y % G.cluster[1], blockIdx.z % G.cluster[2]};
}
inline uint3 cluster_id() { return uint3{blockIdx.x / G.cluster[0], blockIdx.y / G.cluster[1], blockIdx.z / G.cluster[2]}; }
inline uint3 cluster_count() {
  return uint3{gridDim.x / G.cluster[0], gridDim.y / G.cluster[1], gridDim.z / G.cluster[2]};
}

// The worker state of block `k` of the running cluster, checked: a rank inside the cluster, a block that has not
// exited (its shared memory is gone on a GPU once its threads have).
inline Runtime& peer(unsigned k, int line, const char* what) {
  if (k >= G.cluster_size)
    fail(DEVICE_MISUSE,
         "ran %s (line %d) for block rank %u of a cluster of %u block%s (ranks 0 to %u): %s", what, line, k,
         G.cluster_size, G.cluster_size == 1 ? "" : "s", G.cluster_size - 1,
         G.cluster_size == 1 ? "a launch without __cluster_dims__ is a cluster of one block"
                             : "take the rank from cluster.block_rank() or %cluster_ctarank, below num_blocks()");
  if (G.cluster_size == 1) return R;
  Runtime& r = rank_state(k);
  if (r.n_done == r.nthreads)
    fail(DEVICE_MISUSE,
         "ran %s (line %d) on the shared memory of block rank %u of the cluster, whose threads have all exited: "
         "on a GPU its shared memory is gone (or another block's). A block must not exit while the cluster's "
         "other blocks still use its shared memory: end the kernel with cluster.sync()", what, line, k);
  return r;
}

// Where a generic pointer into the block's own shared memory lies in block `k`'s (cluster.map_shared_rank, PTX's
// mapa on a generic address).
inline void* map_shared_rank(const void* p, unsigned k, int line, const char* what) {
  const unsigned char* b = (const unsigned char*)p;
  Runtime& me = R;
  size_t offset;
  bool dynamic;
  if (b >= me.arena && b < me.arena + S.arena_used) {
    offset = (size_t)(b - me.arena);
    dynamic = false;
  } else if (b >= me.dyn && b <= me.dyn + me.dynamic_shared_bytes) {
    offset = (size_t)(b - me.dyn);
    dynamic = true;
  } else {
    fail(DEVICE_MISUSE,
         "ran %s (line %d): %p is not in the block's shared memory: map_shared_rank (and mapa) take the address "
         "of a __shared__ variable, or one in the extern __shared__ buffer, of the calling block", what, line, p);
  }
  Runtime& to = peer(k, line, what);
  return dynamic ? (void*)(to.dyn + offset) : (void*)(to.arena + offset);
}

// Which block of the cluster a generic pointer's shared memory belongs to (cluster.query_shared_rank).
inline unsigned query_shared_rank(const void* p, int line) {
  const unsigned char* b = (const unsigned char*)p;
  for (unsigned k = 0; k < G.cluster_size; ++k) {
    const Runtime& r = G.cluster_size == 1 ? R : rank_state(k);
    if ((b >= r.arena && b < r.arena + S.arena_used) || (b >= r.dyn && b <= r.dyn + r.dynamic_shared_bytes))
      return k;
  }
  fail(DEVICE_MISUSE,
       "ran cluster.query_shared_rank (line %d): %p is in the shared memory of no block of the cluster", line, p);
}

}  // namespace __gpuedu
#endif  // GPUEDU_SCAN
