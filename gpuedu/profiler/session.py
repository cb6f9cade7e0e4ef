"""``gpuedu.profile()`` and ``gpuedu.racecheck()``: record every launch made inside a ``with`` block.

On the emulator each launch runs on its module's instrumented twin (gpuedu/emulator/
_instrument.py), which computes the same results and counts what Nsight Compute's
counters count (gpuedu/profiler/metrics.py). On a real GPU the launches run as they
are and each record holds its time measured with CUDA events, plus the ``ncu``
command that gives the counters there.
"""
import csv
import os
import re

from .. import launch as _launch
from . import metrics as _metrics

# architecture -> the GPU whose occupancy rules sm__maximum_warps_per_active_cycle_pct follows, and whose
# L2 the DRAM model uses, unless the profile names a GPU
ARCH_GPU = {"sm_75": "T4", "sm_80": "A100", "sm_86": "A6000", "sm_90": "H100"}

#: Where the host compiler's code and nvcc's may differ, said in ``KernelRecord.reasons`` beside the count.
SHARED_VECTOR_NOTE = (
    "counted on the host compiler's code, one request per shared access it keeps: nvcc may merge neighbouring "
    "shared loads into one vector load (LDS.64/LDS.128), fewer instructions and wavefronts (a tiled matmul: "
    "98,304 wavefronts measured by Nsight Compute on an H200 against 131,072 counted, 2026-11-26)")


def _gpu_for(arch, gpu):
    """The GPU a profile's compiler figures and DRAM model are for: ``gpu`` when named, else the arch's."""
    from .gpus import get_gpu
    if gpu is None:
        return get_gpu(ARCH_GPU.get(arch, "H100"))
    g = get_gpu(gpu)
    if arch is not None and g.arch != arch:
        raise ValueError(f"gpu {g.name!r} is {g.arch}, but arch={arch!r} was asked for: leave arch out (it follows "
                         f"the GPU) or name a GPU of {arch}")
    return g


def _modelled_l2_sizes():
    """The L2 sizes of every GPU the profiler knows: the emulator models each as it counts."""
    from .gpus import GPUS
    return sorted({g.l2_bytes for g in GPUS})


class KernelRecord:
    """One launch: its shape, its metrics (Nsight Compute's names), races, and a modelled GPU time.

    ``metrics[name]`` is a Python int (``None`` where it is unknown); ``reasons[name]`` says why it is
    unknown, or how the figure may differ from what Nsight Compute shows on a GPU (where the host
    compiler's code and nvcc's differ, how a figure was modelled); ``kind(name)`` says whether a figure
    is counted, modelled or from the compiler. ``gpu`` is the GPU whose L2 the DRAM model uses and
    whose occupancy rules apply.
    """

    def __init__(self, name, grid, block, shared_dynamic, counts=None, hazards=(), seconds=None,
                 source=None, arch="sm_90", backend="cpu", error=None, reason=None, errors=(), gpu=None,
                 target=None):
        self.name = name
        self.grid = tuple(grid)
        self.block = tuple(block)
        self.shared_dynamic = int(shared_dynamic)
        self.hazards = list(hazards)
        self.errors = list(errors)      # memcheck: out-of-bounds and misaligned accesses
        self.seconds = seconds          # cpu: the instrumented emulator's run; cuda: CUDA events
        self.backend = backend
        self.arch = arch
        self.gpu = _gpu_for(None, gpu) if gpu is not None else _gpu_for(arch, None)
        self.error = error
        self._source = source           # (source, options, no_extern_c, include_dirs) for nvcc
        # the module's own architecture-specific target (sm_90a: wgmma and setmaxnreg, which ptxas refuses for
        # sm_90) when it is `arch`'s: what nvcc compiles the source for, for the compiler's figures
        self._target = target
        specific = re.fullmatch(r"sm_(\d+)a", target or "")
        self._compile_arch = target if specific and f"sm_{specific[1]}" == arch else arch
        self._counts = counts
        self._reason = reason
        self._metrics = None
        self._reasons = {}
        self.occupancy = None           # the occupancy calculator's result for `arch`, once known
        self.setmaxnreg = None          # where setmaxnreg ran: each warpgroup's registers, needed and allocated
        self.ptxas_registers = None     # registers as ptxas reports them (launch__registers_per_thread: at least 16)

    # -- metrics
    @property
    def reasons(self):
        """{metric name: why it is unknown, or how it may differ from what Nsight Compute shows}."""
        self.metrics   # noqa: B018 - the reasons are written as the metrics are worked out
        return self._reasons

    @property
    def counts(self):
        """The emulator's own counts of this launch (a copy; ``gpuedu.emulator.hooks.COUNTERS`` names them), the
        ones no Nsight Compute metric holds among them (``tma_load_bytes``, ``mbarrier_waits``, ``wgmma_flops``, ...);
        None where the launch was not counted (a GPU's, or a failed one)."""
        return None if self._counts is None else dict(self._counts)

    @property
    def metrics(self):
        if self._metrics is None:
            self._metrics = self._collect()
        return self._metrics

    def _collect(self):
        m = {"launch__grid_size": self.grid[0] * self.grid[1] * self.grid[2],
             "launch__block_size": self.block[0] * self.block[1] * self.block[2],
             "launch__shared_mem_per_block_dynamic": self.shared_dynamic}
        if self._counts is not None:
            m.update(_metrics.from_counts(self._counts, self.gpu.l2_bytes))
            self._count_notes(m)
        else:
            why = self._reason or "not counted"
            for name in list(_metrics.COUNTED) + list(_metrics.MODELLED):
                m[name] = None
                self._reasons[name] = why
        m.update(self._compiler_metrics())
        return m

    def _count_notes(self, m):
        """Say, beside each count, where the host compiler's code and nvcc's may differ, and what a model is."""
        c = self._counts
        divergent = "smsp__sass_branch_targets_threads_divergent.sum"
        if "host_divergent_branches" in c:
            host = c["host_divergent_branches"]
            self._reasons[divergent] = (
                f"{m[divergent]:,} of the {host:,} places where a warp's lanes went different ways in the host "
                f"compiler's code are branches nvcc keeps; the other {host - m[divergent]:,} are short bodies nvcc "
                f"predicates (no branch: the lanes stay active, those with a false condition do nothing) or lanes "
                f"leaving the kernel (see gpuedu.profiler.metrics)")
        if m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]:
            for name in ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                         "smsp__sass_inst_executed_op_shared_ld.sum"):
                self._reasons[name] = SHARED_VECTOR_NOTE
        wmma, k16, k8 = c.get("mma_sync", 0), c.get("hmma_16816", 0), c.get("hmma_1688", 0)
        if wmma or k16 or k8:
            self._reasons[_metrics.TENSOR_HMMA] = (
                f"{k16 + k8:,} inline PTX mma.sync ({k16:,} m16n8k16, HMMA.16816; {k8:,} m16n8k8, HMMA.1688) and "
                f"{wmma:,} WMMA mma_sync, each two HMMA.16816 as nvcc compiles it for sm_80 and later: "
                f"{k16 + k8:,} + 2 x {wmma:,}")
        if c.get("wgmma"):
            self._reasons[_metrics.TENSOR_GMMA] = (
                f"{c['wgmma']:,} wgmma.mma_async (one a warpgroup a call, counted), each an HGMMA that the warpgroup's "
                f"4 warps execute: 4 x {c['wgmma']:,} warp-level instructions, as Nsight Compute's inst_executed "
                f"counts them (read from the metric's definition; not yet compared with ncu on a GPU)")
        if c.get("ldgsts_global_requests"):
            note = (f"includes cp.async's global reads ({c['ldgsts_global_requests']:,} LDGSTS requests, "
                    f"{c.get('ldgsts_global_sectors', 0):,} sectors), as Nsight Compute's L1 counts them (an H200, "
                    f"2026-11-26: a kernel with no LDG made as many global load requests as LDGSTS); "
                    f"smsp__sass_inst_executed_op_global_ld.sum does not")
            for name in ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
                         "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"):
                self._reasons[name] = note
        if c.get("global_atom_requests") or c.get("global_red_requests"):
            self._reasons["smsp__sass_inst_executed_op_global_red.sum"] = (
                "an atomic whose result the statement discards (atomicAdd(&x, v);) is a RED, one whose result is "
                "read an ATOM, as nvcc compiles them; the build reads this from the source's statements")
        note = (f"modelled for the {self.gpu.l2_bytes / 2**20:.0f} MB L2 of the {self.gpu.name}: lines the launch "
                f"re-reads while still in L2 hit, DRAM reads 64-byte pairs of sectors, and written lines still in "
                f"L2 when the launch ends are not written yet (gpuedu.profiler.metrics.dram_bytes)")
        self._reasons["dram__bytes_read.sum"] = self._reasons["dram__bytes_write.sum"] = note

    def dram_bytes(self, gpu=None):
        """``(read, written)`` modelled DRAM bytes of this launch on ``gpu`` (default: the record's GPU)."""
        if self._counts is None:
            return None, None
        from .gpus import get_gpu
        g = self.gpu if gpu is None else get_gpu(gpu)
        read, written = _metrics.dram_bytes(self._counts, g.l2_bytes)
        return int(read), int(written)

    def lanes_per_instruction(self, space=None):
        """Average active lanes per warp-level memory instruction (``space``: "global", "shared" or None for
        both): 32 when every lane of each warp takes part, fewer where lanes are idle (counted)."""
        if space not in (None, "global", "shared"):
            raise ValueError(f"space is 'global', 'shared' or None (both), got {space!r}")
        m = self.metrics
        pairs = [(m[i], m[t]) for i, t in _metrics.MEMORY_LANES if space is None or f"_op_{space}_" in i]
        if any(i is None or t is None for i, t in pairs):
            return None
        instructions = sum(i for i, _ in pairs)
        return None if not instructions else sum(t for _, t in pairs) / instructions

    def _compiler_metrics(self):
        names = _metrics.COMPILER
        if self._source is None:
            for n in names:
                self._reasons[n] = self._reason or "the kernel's source is unknown"
            return dict.fromkeys(names)
        try:
            from .occupancy import theoretical_occupancy
            from .resources import ResourcesUnavailable, resource_usage
        except ImportError as exc:  # pragma: no cover - a partial install
            for n in names:
                self._reasons[n] = f"the compiler's figures are unavailable: {exc}"
            return dict.fromkeys(names)
        source, options, no_extern_c, include_dirs = self._source
        try:
            usage = resource_usage(source, self.name, arch=self._compile_arch, options=options or (),
                                   no_extern_c=no_extern_c, include_dirs=include_dirs or ())
        except ResourcesUnavailable as exc:
            for n in names:
                self._reasons[n] = str(exc)
            return dict.fromkeys(names)
        from .occupancy import MIN_LAUNCH_REGISTERS, launch_registers
        gpu = self.gpu if self.gpu.arch == self.arch else ARCH_GPU.get(self.arch)
        self.ptxas_registers = usage["registers"]
        registers = launch_registers(usage["registers"])
        out = {"launch__registers_per_thread": registers,
               "launch__shared_mem_per_block_static": usage["shared_static"],
               "sm__maximum_warps_per_active_cycle_pct": None}
        if registers != usage["registers"]:
            self._reasons["launch__registers_per_thread"] = (
                f"ptxas uses {usage['registers']} registers a thread; a launch gets at least "
                f"{MIN_LAUNCH_REGISTERS}, which is what Nsight Compute reports (measured on an H200, 2026-11-26)")
        if gpu is None:
            self._reasons["sm__maximum_warps_per_active_cycle_pct"] = (
                f"no occupancy rules for {self.arch} here (known: {', '.join(sorted(ARCH_GPU))})")
            return out
        try:
            occ = theoretical_occupancy(gpu, self.metrics_threads, usage["registers"],
                                        usage["shared_static"] + self.shared_dynamic)
        except ValueError as exc:
            self._reasons["sm__maximum_warps_per_active_cycle_pct"] = str(exc)
            return out
        self.occupancy = occ
        out["sm__maximum_warps_per_active_cycle_pct"] = occ.percent
        self._setmaxnreg_reasons(registers)
        return out

    def _setmaxnreg_reasons(self, registers):
        """Where the kernel's warpgroups move registers with setmaxnreg (counted: the largest count each warpgroup
        of a block asked for): whether the block's allocation at launch (``registers`` a thread, what occupancy
        counts) holds them all, as it must, or setmaxnreg.inc waits for ever on a GPU."""
        counts = self._counts or {}     # (none for a launch that failed)
        groups = [counts.get(f"setmaxnreg_wg{g}", 0) for g in range(-(-self.metrics_threads // 128))]
        if not any(groups):
            self.setmaxnreg = None
            return
        each = [g or registers for g in groups]
        need, have = 128 * sum(each), registers * self.metrics_threads
        self.setmaxnreg = {"warpgroups": each, "needed": need, "allocated": have}
        said = ", ".join(f"{r}" for r in each)
        if need <= have:
            why = (f"setmaxnreg (counted) moves registers between the block's warpgroups: {said} a thread, "
                   f"{need:,} registers, within the {have:,} the block holds from its launch ({registers} a thread "
                   f"x {self.metrics_threads} threads, what occupancy counts)")
        else:
            why = (f"setmaxnreg (counted) asks for {said} registers a thread in the block's warpgroups, {need:,} in "
                   f"all, more than the {have:,} the block holds from its launch ({registers} a thread x "
                   f"{self.metrics_threads} threads): on a GPU a setmaxnreg.inc waits until registers are free, for "
                   f"ever here; lower the .inc counts, or raise the launch's (__launch_bounds__, -maxrregcount)")
        for name in ("launch__registers_per_thread", "sm__maximum_warps_per_active_cycle_pct"):
            self._reasons[name] = (self._reasons[name] + "; " + why) if name in self._reasons else why

    @property
    def metrics_threads(self):
        return self.block[0] * self.block[1] * self.block[2]

    def kind(self, name):
        """"counted", "modelled" or "compiler" (see gpuedu.profiler.metrics)."""
        return _metrics.kind(name)

    def sectors_per_request(self, op="ld"):
        """Global sectors per request for ``op`` ("ld", "st", "atom" or "red"): 4 is a coalesced float load."""
        req = self.metrics[f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum"]
        sec = self.metrics[f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum"]
        if not req:
            return None
        return sec / req

    def bank_conflicts(self):
        """Shared-memory bank conflicts (loads and stores)."""
        m = self.metrics
        a = m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"]
        b = m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"]
        return None if a is None else a + b

    # -- the model
    def predict(self, gpu="H100", flops=None, pipe="fp32", l2_warm=False):
        """Modelled time of this launch on a named GPU (a model, not a measurement), with its limiter.

        ``flops`` is the learner's napkin count of the kernel's floating-point operations; ``pipe`` where they
        run: "fp32" (the CUDA cores) or "tensor" (the FP16 tensor cores). ``l2_warm=True``: the launch's data is
        already in L2, as in a training step whose weights and activations the launches before it just wrote
        (refused when the lines it touches do not fit in the GPU's L2).
        """
        if self._counts is None:
            raise ValueError(f"kernel '{self.name}' has no counts to model ({self._reason}); profile it on the "
                             f"emulator (GPUEDU_BACKEND=cpu)")
        from .gpus import get_gpu
        from .time_model import BARRIERS, GLOBAL_LINES, MMA_SYNC, TMA_SECTORS, WGMMA_FLOPS, predict
        g = get_gpu(gpu)
        occ = None
        m = dict(self.metrics)
        m["dram__bytes_read.sum"], m["dram__bytes_write.sum"] = self.dram_bytes(g)
        m[BARRIERS] = self._counts.get("barriers")   # None in counts from before the emulator counted them
        m[GLOBAL_LINES] = self._counts.get("global_lines")
        m[MMA_SYNC] = self._counts.get("mma_sync")       # None in counts from before the emulator counted them
        m[WGMMA_FLOPS], m[TMA_SECTORS] = self._counts.get("wgmma_flops"), self._counts.get("tma_sectors")
        regs = self.ptxas_registers if self.ptxas_registers is not None else m.get("launch__registers_per_thread")
        if regs is not None:
            from .occupancy import theoretical_occupancy
            try:
                occ = theoretical_occupancy(g, self.metrics_threads, regs,
                                            m["launch__shared_mem_per_block_static"] + self.shared_dynamic)
            except ValueError:
                occ = None
        if l2_warm:
            footprint = 128 * self._counts.get("l2_lines", 0)
            if footprint > g.l2_bytes:
                raise ValueError(f"l2_warm=True needs the launch's data in L2, but '{self.name}' touches "
                                 f"{footprint / 2**20:.1f} MB and the {g.name}'s L2 holds {g.l2_bytes / 2**20:.0f} MB: "
                                 f"model it cold (l2_warm=False)")
        launch = {"grid": self.grid, "block": self.block, "shared_dynamic": self.shared_dynamic}
        return predict(m, launch, g, flops=flops, occupancy=occ, pipe=pipe, l2_warm=l2_warm)

    def __repr__(self):
        return f"<KernelRecord {self.name} grid={self.grid} block={self.block}>"


class Profile:
    """What a ``with gpuedu.profile() as prof:`` block recorded: ``prof.kernels``, one record per launch."""

    def __init__(self, racecheck=False, arch=None, memcheck=False, gpu=None, emulator=False):
        self.kernels = []
        self.racecheck = racecheck
        self.memcheck = memcheck
        # Count the emulator's launches whatever the backend: on a GPU, the exercise checks judge a kernel's
        # method on the emulator, which is always there, after its values on the GPU.
        self.emulator = emulator
        self.gpu = _gpu_for(arch, gpu)
        self.arch = arch or self.gpu.arch
        self.backend = None
        self._counting = None
        self._restore = None

    # -- the context
    def __enter__(self):
        from .. import backend as _backend
        backend = _backend.setup(verbose=False)
        self.backend = "cpu" if self.emulator else backend.name
        if self.backend == "cpu":
            from gpuedu.emulator import hooks
            self._counting = hooks.counting(self._record, racecheck=self.racecheck, memcheck=self.memcheck,
                                            l2_bytes=_modelled_l2_sizes())
            self._counting.__enter__()
        else:
            self._restore = _time_gpu_launches(self)
        return self

    def __exit__(self, *exc):
        if self._counting is not None:
            self._counting.__exit__(*exc)
            self._counting = None
        elif self._restore is not None:
            self._restore()
        return False

    def _record(self, launch):
        """The emulator's ``LaunchRecord`` of one counted (or, with the reason, uncounted) launch, kept."""
        self.kernels.append(KernelRecord(launch.name, grid=launch.grid, block=launch.block,
                                         shared_dynamic=launch.shared_dynamic, arch=self.arch,
                                         counts=launch.counts, hazards=launch.hazards, errors=launch.errors,
                                         seconds=launch.seconds, source=launch.source, reason=launch.reason,
                                         error=launch.error, gpu=self.gpu, target=launch.target))

    # -- reading it
    @property
    def hazards(self):
        """Every race found (with racecheck on), each with the kernel's name added."""
        return [dict(h, kernel=k.name) for k in self.kernels for h in k.hazards]

    @property
    def errors(self):
        """Every out-of-bounds or misaligned access found (with memcheck on), with the kernel's name added."""
        return [dict(e, kernel=k.name) for k in self.kernels for e in k.errors]

    def __len__(self):
        return len(self.kernels)

    def __iter__(self):
        return iter(self.kernels)

    def __getitem__(self, i):
        return self.kernels[i]

    def __str__(self):
        from .report import table
        return table(self)

    #: ``write_csv``'s columns: ``ncu --csv``'s names for the ones both have, and each figure's kind.
    CSV_COLUMNS = ("ID", "Kernel Name", "Block Size", "Grid Size", "Metric Name", "Metric Kind", "Metric Value")

    def write_csv(self, file):
        """Every known figure of every launch, one row each, laid out as ``ncu --csv`` lays out its rows.

        ``file`` is a path or an open text file. A row's ``ID`` is the launch's place in the run (from 0,
        as ncu numbers them), ``Metric Kind`` says whether the figure is counted, modelled or from the
        compiler; figures that are unknown for a launch are left out (``KernelRecord.reasons`` says why).
        ``benchmarks/ncu_compare.py compare ncu.csv --counted this.csv`` sets it beside ncu's rows.
        """
        if isinstance(file, (str, os.PathLike)):
            with open(file, "w", newline="", encoding="utf-8") as f:
                return self.write_csv(f)
        out = csv.writer(file, quoting=csv.QUOTE_ALL, lineterminator="\n")
        out.writerow(self.CSV_COLUMNS)
        rows = 0
        for i, rec in enumerate(self.kernels):
            for name, value in sorted(rec.metrics.items()):
                if value is None:
                    continue
                out.writerow((i, rec.name, str(rec.block), str(rec.grid), name, rec.kind(name), value))
                rows += 1
        return rows

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


def profile(racecheck=False, arch=None, gpu=None):
    """Record every kernel launch inside the ``with`` block: counters, races and a modelled GPU time.

    ::

        with gpuedu.profile() as prof:
            kernel(out, x, np.int32(n), block=(256, 1, 1), grid=(blocks, 1))
        rec = prof.kernels[-1]
        rec.metrics["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]   # counted
        rec.predict("H100", flops=2 * n)                                  # modelled
        print(prof)                                                       # one row per launch

    Results are the same as without profiling; a profiled launch runs slower (and the
    first one of a module compiles its instrumented twin, a few seconds). ``racecheck=True``
    also looks for races (see ``racecheck``). ``gpu`` names the GPU whose L2 the DRAM model
    uses and whose occupancy rules apply (default: the H100 of sm_90); ``arch`` is the
    architecture whose compiler gives registers, static shared memory and occupancy (default:
    the GPU's; nvcc on PATH, else None, with the reason in ``rec.reasons``).
    """
    return Profile(racecheck=racecheck, arch=arch, gpu=gpu)


def racecheck(arch=None):
    """Like compute-sanitizer's racecheck, without a GPU: ``with gpuedu.racecheck() as rc:``.

    Reports, in ``rc.hazards``, every pair of threads that touch one address in the same
    barrier interval, one of them writing, not both atomically: in shared memory (two
    threads of a block with no ``__syncthreads``, or lanes of a warp with no ``__syncwarp``,
    in between) and in global memory (two threads of one launch, unless a barrier of their
    block orders them). Each hazard names both threads, the address and the source lines.
    Inter-block communication through ``__threadfence`` and flags is reported too.
    """
    return Profile(racecheck=True, arch=arch)


def memcheck(arch=None):
    """Like compute-sanitizer's memcheck, without a GPU: ``with gpuedu.memcheck() as mc:``, then ``mc.errors``.

    Reports accesses just past (or before) a device allocation, including the slack a plain launch
    cannot see (a write one element past a 100-float buffer), past a ``__shared__`` array or past the
    dynamic shared memory the launch asked for (``shared=``), and accesses not aligned to their size
    (a GPU faults on those): each with the thread, the place and the source line.

    What only this sees (a plain launch goes on without a word):

    - a read of the slack after a buffer's end, or of the 16 bytes before its start (a plain launch checks
      those bytes for writes, after the launch);
    - a vector type (``float4``, ``int2``, ``double2``...) read or written at an address that is not a multiple
      of its size, where the host compiler splits the access into scalar ones (a plain launch stops only where
      the CPU refuses it: an aligned SSE move on x86, made for a whole-struct copy). Built by clang++, a kernel
      that uses some of the vector's fields loads only those, each aligned, and neither sees it;
    - a local array indexed a few elements past its end, within the thread's own stack frame (a plain launch
      stops when the write reaches the stack protector's canary, or the inaccessible window a few hundred bytes
      above the launch's stack: the array's name and the index come from here, at the line);
    - shared memory written more than 256 bytes past a ``__shared__`` array but within the pages the module's
      ``__shared__`` variables use (a plain launch watches the 256 bytes after each array, and faults, naming the
      thread, only beyond those pages: a static array is named with its index, here, by the bounds check);
    - a read just past the dynamic shared memory that ``shared=`` asked for, within the 128-byte line its end lies
      in (a plain launch watches those bytes for writes, and faults, naming the thread, on any access beyond
      them), and an access before its start.
    """
    return Profile(memcheck=True, arch=arch)


def device_sm():
    """The current CUDA device's architecture as a number (90 for sm_90), or None when it cannot be asked."""
    try:
        import pycuda.driver as drv
        major, minor = drv.Context.get_device().compute_capability()
        return 10 * major + minor
    except Exception:   # no context yet, or a PyCUDA without it: the command then asks for every metric
        return None


def _time_gpu_launches(prof):
    """On real PyCUDA: time every launch with CUDA events; returns the function that stops it."""
    import pycuda.driver as drv
    cls = drv.Function
    saved = {name: getattr(cls, name) for name in ("__call__", "prepared_call", "prepared_async_call")}
    reason = ("counters come from the emulator; on this GPU, run: " + _metrics.ncu_command(sm=device_sm()))

    def timed(name):
        original = saved[name]

        def wrapper(self, *args, **kwargs):
            start, end = drv.Event(), drv.Event()
            start.record()
            result = original(self, *args, **kwargs)
            end.record()
            end.synchronize()
            block = kwargs.get("block") or (args[1] if name.startswith("prepared") and len(args) > 1 else (1, 1, 1))
            grid = kwargs.get("grid") or (args[0] if name.startswith("prepared") and args else (1, 1))
            block = tuple(block) + (1,) * (3 - len(tuple(block)))
            grid = tuple(grid) + (1,) * (3 - len(tuple(grid)))
            prof.kernels.append(KernelRecord(_launch.function_name(self), grid, block,
                                             kwargs.get("shared", kwargs.get("shared_size", 0)) or 0,
                                             seconds=start.time_till(end) / 1e3, backend="cuda", reason=reason))
            return result
        return wrapper

    for name in saved:
        setattr(cls, name, timed(name))

    def restore():
        for name, fn in saved.items():
            setattr(cls, name, fn)
    return restore
