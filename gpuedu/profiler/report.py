"""Text reports of a profile: one row per launch, like ``ncu``'s summary, and the races found."""


def _fmt(value, spec="d"):
    if value is None:
        return "-"
    return format(value, spec)


def _ratio(a, b):
    return None if a is None or not b else a / b


def table(prof):
    """One row per launch: shape, global requests and sectors per request, shared wavefronts and bank
    conflicts, divergent branches, active lanes per memory instruction, registers (as a launch gets them) and
    theoretical occupancy (counted / compiler figures)."""
    if not prof.kernels:
        return "gpuedu.profile: no kernel was launched inside the with block"
    head = ("kernel", "grid", "block", "ld req", "sect/req", "st req", "sect/req", "shared wf", "conflicts",
            "divergent", "lanes", "regs", "occupancy")
    rows = []
    for k in prof.kernels:
        m = k.metrics
        ld = m.get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")
        st = m.get("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum")
        waves = None
        if m.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum") is not None:
            waves = (m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]
                     + m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"])
        occ = m.get("sm__maximum_warps_per_active_cycle_pct")
        name = k.name if k.error is None else k.name + " (failed)"
        rows.append((name, "x".join(map(str, _trim(k.grid))), "x".join(map(str, _trim(k.block))),
                     _fmt(ld), _fmt(_ratio(m.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"), ld), ".1f"),
                     _fmt(st), _fmt(_ratio(m.get("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"), st), ".1f"),
                     _fmt(waves), _fmt(k.bank_conflicts()),
                     _fmt(m.get("smsp__sass_branch_targets_threads_divergent.sum")),
                     _fmt(k.lanes_per_instruction() if k._counts is not None else None, ".1f"),
                     _fmt(m.get("launch__registers_per_thread")), "-" if occ is None else f"{occ:.0f}%"))
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in [head] + rows]
    first = prof.kernels[0]
    if first.backend == "cpu":
        note = (f"counted by the emulator (exact); lanes: active lanes per memory instruction, of 32; regs (as "
                f"allocated) and occupancy from nvcc for {first.arch} ('-' where unavailable: see rec.reasons)")
    else:
        note = "on a GPU: times are measured with CUDA events (rec.seconds); counters: " + (first._reason or "")
    lines.append(note)
    tensor = tensor_table(prof)
    if tensor:
        lines.append(tensor)
    if prof.racecheck:
        lines.append(hazard_report(prof))
    if getattr(prof, "memcheck", False):
        lines.append(memcheck_report(prof))
    return "\n".join(lines)


#: The tensor-core table's columns: (heading, metric).
TENSOR_COLUMNS = (
    ("HMMA", "smsp__inst_executed_pipe_tensor_op_hmma.sum"),
    ("LDSM", "smsp__inst_executed_op_ldsm.sum"),
    ("ldsm wf", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum"),
    ("conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum"),
    ("LDGSTS", "smsp__inst_executed_op_ldgsts.sum"),
    ("sect/req", None),
    ("ldgsts wf", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum"),
    ("conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum"),
)


#: The column a profile with warpgroup MMA gets too, after HMMA (a profile without keeps the table it had).
GMMA_COLUMN = ("GMMA", "sm__inst_executed_pipe_tensor_op_gmma.sum")


def tensor_table(prof):
    """The launches that ran tensor-core instructions, ldmatrix or cp.async, one row each (counted): HMMA
    instructions (WMMA's mma_sync two each), GMMA (wgmma.mma_async) where any launch ran one, LDSM instructions with
    their wavefronts and bank conflicts, LDGSTS instructions with their global sectors per request and their shared
    wavefronts and bank conflicts; "" when none did."""
    columns = list(TENSOR_COLUMNS)
    gmma = any(k.metrics.get(GMMA_COLUMN[1]) for k in prof.kernels)
    if gmma:
        columns.insert(1, GMMA_COLUMN)
    rows = []
    for k in prof.kernels:
        m = k.metrics
        if not any(m.get(name) for _, name in columns if name):
            continue
        sectors = _ratio(m.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum"),
                         m.get("l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum"))
        rows.append([k.name] + [_fmt(sectors, ".1f") if name is None else _fmt(m.get(name))
                                for _, name in columns])
    if not rows:
        return ""
    head = ["tensor cores"] + [h for h, _ in columns]
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in [head] + rows]
    lines.append("counted: HMMA = inline PTX mma.sync + 2 x WMMA mma_sync (smsp__inst_executed_pipe_tensor_op_hmma); "
                 + ("GMMA = 4 x wgmma.mma_async, an HGMMA for each warp of the warpgroup "
                    "(sm__inst_executed_pipe_tensor_op_gmma); " if gmma else "")
                 + "ldmatrix as LDSM, cp.async as LDGSTS, their shared wavefronts and bank conflicts apart from LDS's "
                 "and STS's (gpuedu.profiler.metrics)")
    return "\n".join(lines)


def _trim(dims):
    dims = list(dims)
    while len(dims) > 1 and dims[-1] == 1:
        dims.pop()
    return dims


def hazard_report(prof):
    """The races found, one paragraph per kind and pair of source lines, like compute-sanitizer's racecheck."""
    hazards = prof.hazards
    if not hazards:
        return "racecheck: no hazards found"
    out = [f"racecheck: {len(hazards)} hazard{'s' if len(hazards) != 1 else ''} found"]
    for h in hazards:
        where = h["where"]
        if h["space"] == "shared":
            place = f"{where['shared']} ({where['variable_bytes']} bytes), byte offset {where['offset']}"
        else:
            place = f"a {where['allocation_bytes']}-byte allocation, byte offset {where['offset']}"
        a, b = h["first"], h["second"]
        if h["kind"] in ("read-before-wait", "write-before-wait"):
            what = "reads" if h["kind"] == "read-before-wait" else "writes"
            out.append(f"  {h['kind']} hazard in {h['space']} memory of kernel '{h['kernel']}' at {place}: thread "
                       f"{b['thread']} of block {b['block']} ({b['line'] or 'line unknown'}) {what} bytes that the "
                       f"cp.async of thread {a['thread']} of block {a['block']} ({a['line'] or 'line unknown'}) has "
                       f"not landed: no wait of that thread covers the copy yet. Wait for its group first "
                       f"(cp.async.wait_group N, wait_all or __pipeline_wait_prior(N)), then __syncthreads() so that "
                       f"every thread's copies are visible, before touching them ({h['count']} "
                       f"time{'s' if h['count'] != 1 else ''})")
            continue
        out.append(f"  {h['kind']} hazard in {h['space']} memory of kernel '{h['kernel']}' at {place}: "
                   f"thread {a['thread']} of block {a['block']} ({a['line'] or 'line unknown'}) and thread "
                   f"{b['thread']} of block {b['block']} ({b['line'] or 'line unknown'}), "
                   f"with no barrier between them ({h['count']} time{'s' if h['count'] != 1 else ''})")
    return "\n".join(out)


def modelled_times(prof, gpu):
    """Each launch's modelled time on ``gpu`` and its limiter: a model of that GPU, never a measurement."""
    lines = [f"modelled on {gpu} (a roofline model of counted traffic, not a measurement):"]
    for k in prof.kernels:
        try:
            p = k.predict(gpu)
        except ValueError as exc:
            lines.append(f"  {k.name}: {exc}")
            continue
        lines.append(f"  {k.name}: {p.seconds * 1e6:.2f} us, {p.limiter}-bound")
    return "\n".join(lines)


def memcheck_report(prof):
    """The invalid accesses found, one line each, in the words of compute-sanitizer's memcheck."""
    errors = prof.errors
    if not errors:
        return "memcheck: no invalid accesses found"
    out = [f"memcheck: {len(errors)} invalid access{'es' if len(errors) != 1 else ''} found"]
    for e in errors:
        space = "__global__" if e["space"] == "global" else "__shared__"
        what = e.get("region", "allocation") if e["space"] == "global" else (
            "dynamic shared memory (shared=)" if e["region"] == "dynamic" else "__shared__ variable")
        if e["kind"] == "misaligned":
            place = f"misaligned: byte offset {e['offset']} of a {e['region_bytes']}-byte {what} is not a multiple of {e['size']}"
        elif e["offset"] < 0:
            place = f"{-e['offset']} bytes before a {e['region_bytes']}-byte {what}"
        else:
            place = f"{e['offset'] - e['region_bytes']} bytes past the end of a {e['region_bytes']}-byte {what}"
        out.append(f"  invalid {space} {e['access']} of size {e['size']} in kernel '{e['kernel']}' at "
                   f"{e['line'] or 'an unknown line'} by thread {e['thread']} of block {e['block']}: {place} "
                   f"({e['count']} time{'s' if e['count'] != 1 else ''})")
    return "\n".join(out)
