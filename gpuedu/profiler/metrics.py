"""Nsight Compute's metric names for what the emulator counts, and what kind of figure each is.

A learner who later runs ``ncu --metrics <name> python script.py`` on a GPU reads the
same words. Every figure is one of three kinds, and the course always says which:

- **counted**: exact, from the emulator running every thread of the kernel (requests,
  sectors, wavefronts, bank conflicts, divergent branches, launch shape);
- **compiler**: from the real CUDA compiler (``nvcc -Xptxas -v``) for a chosen
  architecture: registers, static shared memory, and the theoretical occupancy that
  follows from them by the occupancy calculator's rules;
- **modelled**: from a stated model, e.g. DRAM bytes = distinct 32-byte sectors the
  launch touched (as if L2 held everything a launch reuses).

Definitions, as on the hardware: a *request* is one warp-level memory instruction with
at least one active lane; a *sector* an aligned 32-byte chunk; a shared-memory request
takes as many *wavefronts* as its busiest bank has distinct 4-byte words (one word read
by many lanes is a broadcast; 8- and 16-byte accesses go a half- and a quarter-warp at a
time); *bank conflicts* = wavefronts - the wavefronts the access width needs at least.
A branch instance is *divergent* when the active lanes of a warp go on to different
basic blocks.

The counts follow the host compiler's code for the kernel at -O2 (its basic blocks and the
loads it keeps), which may differ in detail from nvcc's; module ``__device__`` and
``__constant__`` variables are not counted; WMMA fragment loads count as every lane loading
the whole tile (the emulator's mma.h), so tensor-core kernels' counts are overstated.
"""

# Nsight Compute name -> how it follows from the emulator's raw counts (_instrument.COUNTERS).
COUNTED = {
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": lambda c: c["global_ld_requests"],
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": lambda c: c["global_ld_sectors"],
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
}

MODELLED = {
    "dram__bytes_read.sum": lambda c: 32 * c["dram_read_sectors"],
    "dram__bytes_write.sum": lambda c: 32 * c["dram_write_sectors"],
}

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


def from_counts(counts):
    """The counted and modelled metrics, as Python ints, from one launch's raw counts."""
    out = {name: int(f(counts)) for name, f in COUNTED.items()}
    out.update({name: int(f(counts)) for name, f in MODELLED.items()})
    return out


def ncu_command(script="script.py", names=None):
    """The Nsight Compute command line that measures the same metrics on a GPU."""
    names = names or [n for n in list(COUNTED) + list(MODELLED)] + list(COMPILER)
    return f"ncu --metrics {','.join(names)} python {script}"
