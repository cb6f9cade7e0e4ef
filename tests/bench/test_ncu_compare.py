"""benchmarks/ncu_compare.py reads Nsight Compute's CSV and lines its launches up with the emulator's."""
import numpy as np
import pytest
from benchmark_helpers import load_benchmark


@pytest.fixture(scope="module")
def nc():
    return load_benchmark("ncu_compare")


CSV = '''==PROF== Connected to process 123
"ID","Process ID","Kernel Name","Metric Name","Metric Unit","Metric Value"
"0","123","reduce_kernel1(float*, const float*, int)","smsp__sass_branch_targets_threads_divergent.sum","","0"
"0","123","reduce_kernel1(float*, const float*, int)","l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum","sector","8,192"
"1","123","fill","l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum","sector","4"
"2","123","reduce_kernel2(float*, const float*, int)","smsp__sass_branch_targets_threads_divergent.sum","","0"
"2","123","reduce_kernel2(float*, const float*, int)","launch__registers_per_thread","register/thread","16"
==PROF== Disconnected
'''


def test_the_csv_gives_launches_in_order_with_their_metrics(nc, tmp_path):
    path = tmp_path / "ncu.csv"
    path.write_text(CSV)
    launches = nc.read_ncu_csv(str(path))
    assert [name for name, _ in launches] == ["reduce_kernel1", "fill", "reduce_kernel2"]
    assert launches[0][1]["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == 8192.0
    assert launches[2][1]["launch__registers_per_thread"] == 16.0


def test_compare_counts_agreements_and_names_each_difference(nc, tmp_path):
    path = tmp_path / "ncu.csv"
    path.write_text(CSV)
    measured = nc.read_ncu_csv(str(path))
    counted = [("reduce_kernel1", {"smsp__sass_branch_targets_threads_divergent.sum": 12,
                                   "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 8192}),
               ("reduce_kernel2", {"smsp__sass_branch_targets_threads_divergent.sum": 0,
                                   "launch__registers_per_thread": None})]     # unknown here: not compared
    ours = {"reduce_kernel1", "reduce_kernel2"}
    per_metric, differences = nc.compare(measured, counted, ours=lambda n: n in ours)   # PyCUDA's fill left out
    assert per_metric == {"smsp__sass_branch_targets_threads_divergent.sum": [1, 1],
                          "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": [1, 0]}
    assert differences == [{"kernel": "reduce_kernel1", "metric": "smsp__sass_branch_targets_threads_divergent.sum",
                            "ncu": 0.0, "emulator": 12}]
    with pytest.raises(SystemExit, match="different kernels"):
        nc.compare(measured, counted[:1], ours=lambda n: n in ours)


def test_ncu_is_asked_for_every_counted_and_modelled_metric(nc):
    from gpuedu.profiler import metrics
    names = nc.metric_names()
    assert {metrics.ncu_name(n) for n in set(metrics.COUNTED) | set(metrics.MODELLED)} <= set(names)
    assert not any("[" in n for n in names)    # an instance (the SHFL of sass__inst_executed_per_opcode) is not asked for
    assert "launch__registers_per_thread" in names


def test_compare_reads_the_counted_side_from_gpuedu_profile_csv(nc, tmp_path, capsys):
    ncu = tmp_path / "ncu.csv"
    ncu.write_text(CSV)
    counted = tmp_path / "counted.csv"
    counted.write_text(
        '"ID","Kernel Name","Block Size","Grid Size","Metric Name","Metric Kind","Metric Value"\n'
        '"0","reduce_kernel1","(256, 1, 1)","(32, 1, 1)","smsp__sass_branch_targets_threads_divergent.sum","counted","0"\n'
        '"0","reduce_kernel1","(256, 1, 1)","(32, 1, 1)","l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum","counted","8000"\n'
        '"1","reduce_kernel2","(256, 1, 1)","(32, 1, 1)","launch__registers_per_thread","compiler","16"\n')
    out = tmp_path / "cmp.json"
    assert nc.main(["compare", str(ncu), "--counted", str(counted), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2 of 3 (launch, metric) pairs equal over 2 launches" in printed     # PyCUDA's fill left out
    import json
    record = json.loads(out.read_text())
    assert record["counted"] == "counted.csv" and record["equal"] == 2 and record["pairs"] == 3
    assert record["differences"] == [{"kernel": "reduce_kernel1",
                                      "metric": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                                      "ncu": 8192.0, "emulator": 8000.0}]
    counted.write_text("==PROF== nothing\n")
    with pytest.raises(SystemExit, match="no gpuedu profile --csv rows"):
        nc.main(["compare", str(ncu), "--counted", str(counted)])


def test_ncu_is_asked_for_the_inline_ptx_instructions_metrics(nc):
    names = nc.metric_names()
    for name in ("smsp__inst_executed_pipe_tensor_op_hmma.sum", "smsp__inst_executed_op_ldsm.sum",
                 "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum",
                 "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum", "smsp__inst_executed_op_ldgsts.sum",
                 "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum",
                 "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum",
                 "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldgsts.sum",
                 "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum"):
        assert name in names
    command = nc.ncu_command("/opt/ncu")
    assert command[:6] == ["/opt/ncu", "--csv", "--print-units", "base", "--clock-control", "none"]
    assert command[6:8] == ["--metrics", ",".join(names)] and command[-1] == "workload"
    assert command[-2].endswith("ncu_compare.py")


def _fake_ncu(tmp_path, body):
    """An executable standing in for ncu: it records its arguments and runs `body` (shell)."""
    path = tmp_path / "ncu"
    path.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "args"}\n{body}\n')
    path.chmod(0o755)
    return str(path)


def test_measure_runs_the_workload_under_ncu_and_writes_the_comparison(nc, tmp_path, monkeypatch, capsys):
    ncu = _fake_ncu(tmp_path, "cat <<'EOF'\n" + CSV + "EOF")
    counted = [("reduce_kernel1", {"smsp__sass_branch_targets_threads_divergent.sum": 0,
                                   "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 8192}),
               ("reduce_kernel2", {"smsp__sass_branch_targets_threads_divergent.sum": 0,
                                   "launch__registers_per_thread": 16})]
    asked = []
    monkeypatch.setattr(nc, "emulator_launches", lambda gpu, sm=0: asked.append(gpu) or counted)
    record = nc.measure(str(tmp_path / "out"), "H200", ncu=ncu)
    assert asked == ["H200"]
    assert (record["equal"], record["pairs"]) == (4, 4) and record["differences"] == []
    import json
    assert json.loads((tmp_path / "out" / nc.COMPARISON).read_text()) == record
    assert nc.read_ncu_csv(str(tmp_path / "out" / nc.NCU_CSV))[0][0] == "reduce_kernel1"
    args = (tmp_path / "args").read_text().split()
    assert args[:5] == ["--csv", "--print-units", "base", "--clock-control", "none"] and args[-1] == "workload"
    assert "4 of 4 (launch, metric) pairs equal over 2 launches" in capsys.readouterr().out


def test_measure_says_what_is_missing_when_ncu_is_absent_or_fails(nc, tmp_path, monkeypatch):
    import shutil
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SystemExit, match=r"ncu \(Nsight Compute's command line\) is not on PATH: install Nsight "
                                         r"Compute"):
        nc.measure(str(tmp_path / "out"), "H200")
    failing = _fake_ncu(tmp_path, "echo '==ERROR== the user does not have permission to access NVIDIA GPU "
                                  "Performance Counters' >&2\nexit 1")
    with pytest.raises(SystemExit, match=r"ncu failed \(exit code 1\): ==ERROR== the user does not have permission"):
        nc.measure(str(tmp_path / "out"), "H200", ncu=failing)
    empty = _fake_ncu(tmp_path, "echo '==PROF== Disconnected'")
    with pytest.raises(SystemExit, match="ncu wrote no metric rows"):
        nc.measure(str(tmp_path / "out"), "H200", ncu=empty)


def test_the_workload_runs_each_inline_ptx_kernel_and_checks_its_results(nc):
    import gpuedu
    active = gpuedu.setup(verbose=False)
    if active.name != "cpu":
        pytest.skip("on a GPU the workload runs under ncu (ncu_compare.py measure)")
    with gpuedu.profile() as prof:
        nc.ptx_launches(active)          # raises, naming the kernel, if any result is wrong
    assert [k.name for k in prof.kernels] == [name for name, *_ in nc.PTX_LAUNCHES]
    assert all(k._counts is not None for k in prof.kernels)


def test_the_ldmatrix_reference_follows_the_ptx_isa_layout(nc):
    # tile halves 0, 1, 2, ...: lane l of a packed (layout 0) x4 gets row l / 4 of matrix j, halves 2 (l % 4), +1:
    # matrix j's row r starts at half 64 j + 8 r.
    halves = np.arange(2048, dtype=np.uint16)
    out = nc._ldmatrix_expected(halves, 0, 1).reshape(32, 7)
    lane = 5
    first = 8 * (lane // 4) + 2 * (lane % 4)
    assert [int(v) for v in out[lane, :4]] == [(64 * j + first) | (64 * j + first + 1) << 16 for j in range(4)]
    assert out[lane, 6] == (8 * 2 * (lane % 4) + lane // 4) | (8 * (2 * (lane % 4) + 1) + lane // 4) << 16


@pytest.mark.nvcc
def test_the_inline_ptx_kernels_compile_with_nvcc_for_ampere_and_hopper(nc, tmp_path):
    import shutil
    import subprocess
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    archs = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"]
    proc = subprocess.run(["nvcc", "-fatbin", *archs, "-o", str(tmp_path / "k.fatbin"), nc.PTX_KERNELS],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
