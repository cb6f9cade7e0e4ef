"""Nsight Compute's metric names for what the emulator counts, and what kind of figure each is.

A learner who later runs ``ncu --metrics <name> python script.py`` on a GPU reads the
same words. Every figure is one of three kinds, and the course always says which:

- **counted**: exact, from the emulator running every thread of the kernel (requests,
  sectors, wavefronts, bank conflicts, active lanes of memory instructions, divergent
  branches, launch shape);
- **compiler**: from the real CUDA compiler (``nvcc -Xptxas -v``) for a chosen
  architecture: registers (as the hardware allocates them), static shared memory, and the
  theoretical occupancy that follows from them by the occupancy calculator's rules;
- **modelled**: from a stated model: DRAM bytes from an L2 of the named GPU's size
  (``dram_bytes``, below).

Definitions, as on the hardware: a *request* is one warp-level memory instruction with
at least one active lane; a *sector* an aligned 32-byte chunk; a shared-memory request
takes as many *wavefronts* as its busiest bank has distinct 4-byte words (one word read
by many lanes is a broadcast; 8- and 16-byte accesses go a half- and a quarter-warp at a
time); *bank conflicts* = wavefronts - the wavefronts the access width needs at least.
An atomic whose result the kernel discards is a **RED** on the GPU (``..._op_red``), one whose
result is read an **ATOM** (``..._op_atom``): counted apart, as nvcc compiles them.

**Lost lanes.** ``smsp__sass_thread_inst_executed_op_<space>_<op>.sum`` counts the lanes that
executed each warp-level memory instruction (with their predicate true, as Nsight Compute's
SASS counters do), so lanes over instructions is the average active lanes per memory
instruction (``KernelRecord.lanes_per_instruction``): 32 when every lane works, 1 when one
lane of each warp does. The emulator counts memory instructions exactly; it does not run
nvcc's other instructions, so the all-instruction ratio
``smsp__thread_inst_executed_per_inst_executed.ratio`` is not given.

**Divergence.** ``smsp__sass_branch_targets_threads_divergent.sum`` counts the branches at
which a warp's active lanes go different ways *and that nvcc keeps as branches*: nvcc
predicates a short body (``if (tid % (2*s) == 0) s[tid] += s[tid + s];`` is a handful of
predicated instructions, and Nsight Compute counts 0 there), so a split of the host
compiler's code counts only where some lanes branch again, loop again, or run more than 4
memory instructions before rejoining the others (gpuedu_profile.cpp says how this was checked
against nvcc). A group's path is followed through as many basic blocks as the host compiler
cut it into (g++ and clang++ cut one body into different numbers of blocks). Lanes that end the thread are no branch target (nvcc's EXIT).
The host compiler's own count of splits is in ``KernelRecord.reasons``.

The counts follow the host compiler's code for the kernel at -O2 (its basic blocks and the
loads it keeps), which may differ in detail from nvcc's; a module's ``__device__`` variables are global
memory, counted as device allocations are, and ``__constant__`` variables are not counted (the constant
cache serves them, which Nsight Compute does not count as global loads).

**Local memory.** A thread's array indexed at run time is in local memory on a GPU (DRAM, through L1 and
L2): ``l1tex__t_requests_pipe_lsu_mem_local_op_ld.sum`` and ``..._op_st.sum`` count its warp-level loads and
stores, ``l1tex__t_sectors_...`` their sectors in a GPU's layout (word w of lane l at byte (w * 32 + l) * 4
of the warp's local window: a warp at one index of its lanes' arrays touches 4 sectors). Which arrays nvcc
keeps there is decided from the source as nvcc does (gpuedu/emulator/_scanner.py, local_arrays); arrays
indexed by constants once nvcc's loops are unrolled stay in registers and count nothing, and register spills
are not counted. A WMMA fragment load or store counts as the GPU's lanes make it
(each lane two neighbours in each 8 x 8 block of the tile, mma.sync's fragment layout: the emulator's mma.h),
which matches ncu's shared-memory wavefronts and global sectors, though not its instructions (nvcc moves a
fragment with fewer, wider ones).

**Inline PTX's tensor-core instructions** (gpuedu/emulator/_ptx.py runs them), each warp-level instruction counted
as the GPU executes it:

- ``mma.sync``: one HMMA a warp a call (m16n8k16 is HMMA.16816 on sm_80 and later, m16n8k8 HMMA.1688), on the
  tensor pipe: ``smsp__inst_executed_pipe_tensor_op_hmma.sum``. That total also holds WMMA's: a 16 x 16 x 16
  ``mma_sync`` (and 32 x 8 x 16, 8 x 32 x 16) on halves or bfloat16 is two HMMA.16816, as nvcc compiles it, so the
  metric is the PTX mma.syncs plus twice the WMMA ``mma_sync``s; ``KernelRecord.reasons`` says how many of each.
  (The emulator's own counts keep them apart: ``mma_sync``, ``hmma_16816`` and ``hmma_1688``.)
- ``wgmma.mma_async`` (Hopper, sm_90a): the emulator counts one a warpgroup a call (``wgmma``), and Nsight Compute's
  ``sm__inst_executed_pipe_tensor_op_gmma.sum`` is given as four times that: inline PTX's one instruction is a
  SASS HGMMA that each of the warpgroup's four warps executes, and ``inst_executed`` counts warp-level instructions.
  That factor is read from the metric's definition, not yet compared with Nsight Compute on a GPU here (the
  session's ``reasons`` say so beside the figure).
- ``ldmatrix``: an LDSM instruction (``smsp__inst_executed_op_ldsm.sum``), not an LDS: its shared-memory
  wavefronts and bank conflicts are ``..._mem_shared_op_ldsm.sum``, not ``op_ld``'s. Each matrix is 8 rows of 16
  bytes at the addresses lanes 8j to 8j + 7 give: one wavefront when its rows lie in 8 different groups of 4 banks
  (an address / 16 mod 8), one more for each further row on the busiest group. So an ldmatrix.x4 of 32 rows 16
  bytes apart is 4 wavefronts, 0 conflicts; rows 128 bytes apart share their banks, 8 wavefronts a matrix (28
  conflicts for .x4); a swizzled layout (the row's 16-byte chunk XORed with the row number mod 8) is 4 again.
- ``cp.async`` (and ``cuda_pipeline.h``'s ``__pipeline_memcpy_async``): an LDGSTS instruction
  (``smsp__inst_executed_op_ldgsts.sum``), whose global read is counted as a load's (its requests and sectors:
  ``l1tex__t_..._global_op_ldgsts.sum``) and whose shared write as a store of its width
  (``l1tex__data_..._mem_shared_op_ldgsts.sum``). The L1's global load requests and sectors (``..._global_op_ld``)
  include the LDGSTS ones, as Nsight Compute counted them on an H200 (2026-11-26, benchmarks/results/
  nvidia-h200-ncu.csv: the pipelined WMMA GEMM, whose SASS has no LDG, ``smsp__sass_inst_executed_op_global_ld``
  0, made 1,024 ``l1tex__t_requests_pipe_lsu_mem_global_op_ld`` requests: its 1,024 LDGSTS); the SASS load count
  does not. A lane whose copy only zero-fills (source size 0) reads nothing; lanes of one instruction that read
  different nonzero source sizes are counted at the first lane's.
"""

# Nsight Compute name -> how it follows from the emulator's raw counts (_instrument.COUNTERS).
COUNTED = {
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum":
        lambda c: c["global_ld_requests"] + c.get("ldgsts_global_requests", 0),
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum":
        lambda c: c["global_ld_sectors"] + c.get("ldgsts_global_sectors", 0),
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": lambda c: c["global_st_requests"],
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": lambda c: c["global_st_sectors"],
    "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum": lambda c: c["global_atom_requests"],
    "l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum": lambda c: c["global_atom_sectors"],
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": lambda c: c["shared_ld_wavefronts"],
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum":
        lambda c: c["shared_ld_wavefronts"] - c["shared_ld_ideal_wavefronts"],
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": lambda c: c["shared_st_wavefronts"],
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum":
        lambda c: c["shared_st_wavefronts"] - c["shared_st_ideal_wavefronts"],
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum": lambda c: c["shared_atom_wavefronts"],
    "smsp__sass_inst_executed_op_global_ld.sum": lambda c: c["global_ld_requests"],
    "smsp__sass_inst_executed_op_global_st.sum": lambda c: c["global_st_requests"],
    "smsp__sass_inst_executed_op_global_atom.sum": lambda c: c["global_atom_requests"],
    "smsp__sass_inst_executed_op_shared_ld.sum": lambda c: c["shared_ld_requests"],
    "smsp__sass_inst_executed_op_shared_st.sum": lambda c: c["shared_st_requests"],
    "smsp__sass_inst_executed_op_shared_atom.sum": lambda c: c["shared_atom_requests"],
    "smsp__sass_thread_inst_executed_op_global_atom.sum": lambda c: c["global_atom_lanes"],
    "smsp__sass_thread_inst_executed_op_shared_atom.sum": lambda c: c["shared_atom_lanes"],
    "smsp__sass_branch_targets_threads_divergent.sum": lambda c: c["divergent_branches"],
    "smsp__warps_launched.sum": lambda c: c["warps"],
    "smsp__threads_launched.sum": lambda c: c["threads"],
    "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum": lambda c: c.get("global_red_requests", 0),
    "l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum": lambda c: c.get("global_red_sectors", 0),
    "smsp__sass_inst_executed_op_global_red.sum": lambda c: c.get("global_red_requests", 0),
    "smsp__sass_thread_inst_executed_op_global_red.sum": lambda c: c.get("global_red_lanes", 0),
    "smsp__sass_thread_inst_executed_op_global_ld.sum": lambda c: c.get("global_ld_lanes", 0),
    "smsp__sass_thread_inst_executed_op_global_st.sum": lambda c: c.get("global_st_lanes", 0),
    "smsp__sass_thread_inst_executed_op_shared_ld.sum": lambda c: c.get("shared_ld_lanes", 0),
    "smsp__sass_thread_inst_executed_op_shared_st.sum": lambda c: c.get("shared_st_lanes", 0),
    "l1tex__t_requests_pipe_lsu_mem_local_op_ld.sum": lambda c: c.get("local_ld_requests", 0),
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum": lambda c: c.get("local_ld_sectors", 0),
    "l1tex__t_requests_pipe_lsu_mem_local_op_st.sum": lambda c: c.get("local_st_requests", 0),
    "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum": lambda c: c.get("local_st_sectors", 0),
    "smsp__sass_inst_executed_op_local_ld.sum": lambda c: c.get("local_ld_requests", 0),
    "smsp__sass_inst_executed_op_local_st.sum": lambda c: c.get("local_st_requests", 0),
    "smsp__sass_thread_inst_executed_op_local_ld.sum": lambda c: c.get("local_ld_lanes", 0),
    "smsp__sass_thread_inst_executed_op_local_st.sum": lambda c: c.get("local_st_lanes", 0),
}

#: Warp shuffles (``__shfl_sync`` and its up, down and xor forms, cooperative groups' ``shfl*``), one per warp per
#: call: the SHFL instance of Nsight Compute's ``sass__inst_executed_per_opcode`` (warp-level instructions executed,
#: instanced by SASS opcode; its InstructionStats section and rules read it so). ncu is asked for the metric, and
#: reports every opcode's instance: ``ncu_name`` drops the ``[SHFL]``.
SHUFFLES = "sass__inst_executed_per_opcode[SHFL]"
COUNTED[SHUFFLES] = lambda c: c.get("shuffles", 0)


#: Warp-level instructions on the tensor pipe: inline PTX's mma.sync (HMMA.16816 and HMMA.1688), and WMMA's
#: mma_sync, two HMMA.16816 each (the module docstring says why).
TENSOR_HMMA = "smsp__inst_executed_pipe_tensor_op_hmma.sum"
COUNTED[TENSOR_HMMA] = lambda c: c.get("hmma_16816", 0) + c.get("hmma_1688", 0) + 2 * c.get("mma_sync", 0)
#: Warpgroup MMA (wgmma.mma_async): an HGMMA executed by each of the warpgroup's 4 warps (the module docstring says
#: what is assumed there).
TENSOR_GMMA = "sm__inst_executed_pipe_tensor_op_gmma.sum"
COUNTED[TENSOR_GMMA] = lambda c: 4 * c.get("wgmma", 0)
#: ldmatrix (LDSM) and cp.async (LDGSTS): their instructions, wavefronts and bank conflicts, and LDGSTS's global side.
LDSM = "smsp__inst_executed_op_ldsm.sum"
LDGSTS = "smsp__inst_executed_op_ldgsts.sum"
COUNTED.update({
    LDSM: lambda c: c.get("ldsm_requests", 0),
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum": lambda c: c.get("ldsm_wavefronts", 0),
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum":
        lambda c: c.get("ldsm_wavefronts", 0) - c.get("ldsm_ideal_wavefronts", 0),
    LDGSTS: lambda c: c.get("ldgsts_requests", 0),
    "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum": lambda c: c.get("ldgsts_global_requests", 0),
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum": lambda c: c.get("ldgsts_global_sectors", 0),
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum": lambda c: c.get("ldgsts_wavefronts", 0),
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum":
        lambda c: c.get("ldgsts_wavefronts", 0) - c.get("ldgsts_ideal_wavefronts", 0),
})


#: Hopper's TMA copies (cp.async.bulk.tensor): the UTMALDG and UTMASTG instances of the SASS opcode count, as the
#: emulator counts the copies a thread issues (a kernel elects one lane of a warp to issue each, as its copies are
#: the block's: an assumption where several lanes of one warp issue at once, which a GPU counts as one warp-level
#: instruction). Their bytes, and the mbarrier waits, are the emulator's own counts (``tma_load_bytes``,
#: ``tma_store_bytes``, ``mbarrier_waits``), not yet compared with Nsight Compute.
TMA_LOADS = "sass__inst_executed_per_opcode[UTMALDG]"
TMA_STORES = "sass__inst_executed_per_opcode[UTMASTG]"
COUNTED[TMA_LOADS] = lambda c: c.get("tma_loads", 0)
COUNTED[TMA_STORES] = lambda c: c.get("tma_stores", 0)


#: Metrics a GPU has only from an architecture on (the sm number): LDGSTS (cp.async) is Ampere's, the GMMA pipe
#: Hopper's. ncu refuses a command that asks for a metric the device lacks, so ``ncu_command(sm=...)`` leaves them
#: out below it.
SINCE_SM = {name: 80 for name in COUNTED if "ldgsts" in name}
SINCE_SM[TENSOR_GMMA] = 90
SINCE_SM[TMA_LOADS] = SINCE_SM[TMA_STORES] = 90


def ncu_name(name):
    """The name Nsight Compute is asked for: ``name`` without the instance a counted metric names in brackets."""
    return name.split("[", 1)[0]

MODELLED = ("dram__bytes_read.sum", "dram__bytes_write.sum")

#: (warp-level instructions, lanes) of each kind of memory instruction, for lanes per instruction.
MEMORY_LANES = tuple((f"smsp__sass_inst_executed_op_{space}_{op}.sum", f"smsp__sass_thread_inst_executed_op_{space}_{op}.sum")
                     for space, ops in (("global", ("ld", "st", "atom", "red")), ("shared", ("ld", "st", "atom")),
                                        ("local", ("ld", "st")))
                     for op in ops)

DRAM_PAIR_BYTES = 64      # DRAM moves 64-byte pairs of 32-byte sectors
SECTOR_BYTES = 32
LINE_BYTES = 128


def dram_bytes(counts, l2_bytes):
    """``(read, written)`` DRAM bytes of one launch on a GPU whose L2 holds ``l2_bytes``: a model.

    Modelled: an L2 of that size in 128-byte lines of four 32-byte sectors, least recently used line
    evicted, empty when the launch starts (Nsight Compute flushes the caches before it measures a
    kernel), seeing the warps' requests in the emulator's order (block by block). A load or atomic of a
    sector L2 does not hold reads it from DRAM with its neighbour (DRAM moves 64-byte pairs: a read of
    one float every 128 bytes fetches twice the sectors it uses); a re-read of a line still in L2 is a
    hit; a store dirties its sectors in L2, and DRAM sees them only if the line is evicted before the
    launch ends (an output that fits in L2 is not written by then: ``dram__bytes_write.sum`` is 0, as
    Nsight Compute measured on an H200 with its 60 MB L2, 2026-11-26).
    Not modelled: the order in which a GPU's SMs really interleave their blocks, L2's set associativity
    and its split into two partitions, what earlier launches left in L2, the L1 cache (every global
    sector goes to L2), and writes' own granularity (a dirty sector is written as 32 bytes).

    The emulator runs this model for the L2 of every GPU in ``gpus.GPUS`` as it counts. For counts
    without it (extrapolated to another size by ``scaling.extrapolate``) the footprint decides: if
    the lines the launch touched fit in L2, DRAM reads are the 64-byte pairs first read and nothing is
    written; if not, the same reads (re-reads after an eviction are not known there), and the written
    sectors of all but the last ``l2_bytes`` the launch touched.
    """
    from gpuedu.emulator.hooks import l2_keys
    read_key, write_key = l2_keys(l2_bytes)
    if read_key in counts and write_key in counts:
        return DRAM_PAIR_BYTES * counts[read_key], SECTOR_BYTES * counts[write_key]
    footprint = LINE_BYTES * counts.get("l2_lines", 0)
    pairs = counts.get("dram_read_pairs")
    if pairs is None:   # counts from before the L2 model: distinct sectors, as if L2 held everything
        return SECTOR_BYTES * counts["dram_read_sectors"], SECTOR_BYTES * counts["dram_write_sectors"]
    written = SECTOR_BYTES * counts["dram_write_sectors"]
    if footprint <= l2_bytes:
        return DRAM_PAIR_BYTES * pairs, 0
    return DRAM_PAIR_BYTES * pairs, int(round(written * (1 - l2_bytes / footprint)))

LAUNCH = ("launch__grid_size", "launch__block_size", "launch__shared_mem_per_block_dynamic")
COMPILER = ("launch__registers_per_thread", "launch__shared_mem_per_block_static",
            "sm__maximum_warps_per_active_cycle_pct")


def kind(name):
    """"counted", "modelled" or "compiler": what kind of figure metric ``name`` is."""
    if name in COUNTED or name in LAUNCH:
        return "counted"
    if name in MODELLED:
        return "modelled"
    if name in COMPILER:
        return "compiler"
    raise KeyError(f"unknown metric {name!r}; the metrics gpuedu.profile() gives are: "
                   f"{', '.join(sorted(all_names()))}")


def all_names():
    return list(COUNTED) + list(MODELLED) + list(LAUNCH) + list(COMPILER)


def from_counts(counts, l2_bytes):
    """The counted and modelled metrics, as Python ints, from one launch's raw counts; the DRAM bytes for
    an L2 of ``l2_bytes`` (``dram_bytes``)."""
    out = {name: int(f(counts)) for name, f in COUNTED.items()}
    read, written = dram_bytes(counts, l2_bytes)
    out.update({"dram__bytes_read.sum": int(read), "dram__bytes_write.sum": int(written)})
    return out


def ncu_command(script="script.py", names=None, sm=None):
    """The Nsight Compute command line that measures the same metrics on a GPU (``sm``: the device's architecture,
    as 75 or 90, when known: metrics it lacks are left out)."""
    names = names or [n for n in list(COUNTED) + list(MODELLED)] + list(COMPILER)
    if sm is not None:
        names = [n for n in names if SINCE_SM.get(n, 0) <= int(sm)]
    names = list(dict.fromkeys(ncu_name(n) for n in names))
    return f"ncu --metrics {','.join(names)} python {script}"
