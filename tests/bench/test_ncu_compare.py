"""benchmarks/ncu_compare.py reads Nsight Compute's CSV and lines its launches up with the emulator's."""
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
