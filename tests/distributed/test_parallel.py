"""Data-parallel and pipeline training on real MPI processes, against single-process training."""
import json
import os

import numpy as np
import pytest

from gpuedu.distributed import GradientBuckets, mpi

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")
MPI_OK, MPI_REASON = mpi.mpi_status()
needs_mpi = pytest.mark.skipif(not MPI_OK, reason=MPI_REASON)


def result(done):
    lines = [json.loads(l) for l in done.stdout.splitlines() if l.startswith("{")]
    assert len(lines) == 1, done.stdout
    return lines[0]


@needs_mpi
@pytest.mark.parametrize("ranks, bucket_bytes", [(1, 1 << 20), (2, 1 << 20), (3, 512)])
def test_data_parallel_matches_single_process_training(ranks, bucket_bytes):
    r = result(mpi.run(os.path.join(PROGRAMS, "data_parallel.py"), ranks, [bucket_bytes], timeout=300))
    assert r["identical"], "the ranks' parameters drifted apart"
    if ranks == 1:
        # one rank is exactly gpuedu.train.fit on the same batches
        assert r["max_param_diff"] == 0.0 and r["loss"] == r["ref_loss"]
    else:
        assert r["max_param_diff"] < 1e-4
        np.testing.assert_allclose(r["loss"], r["ref_loss"], rtol=1e-4)
        np.testing.assert_allclose(r["accuracy"], r["ref_accuracy"], atol=1 / 250 + 1e-9)
    if bucket_bytes == 512:
        assert r["buckets"] > 2          # several buckets were packed, reduced and unpacked
    # every rank says how much of each epoch it spent computing: some of it, never more than all of it
    assert len(r["busy"]) == ranks
    for busy, epochs in r["busy"]:
        assert len(busy) == len(epochs) == 2
        assert all(0 < b < e for b, e in zip(busy, epochs))


@needs_mpi
@pytest.mark.parametrize("stages", [2, 3])
def test_pipeline_matches_the_unsplit_model(stages):
    r = result(mpi.run(os.path.join(PROGRAMS, "pipeline.py"), stages, timeout=300))
    assert r["params"] == r["ref_params"]
    assert r["logits_diff"] < 1e-5
    assert r["param_diff"] < 1e-5


def test_buckets_hold_every_gradient_once_in_backward_order():
    import gpuedu
    from gpuedu import nn
    gpuedu.setup("cpu", verbose=False)
    model = nn.mlp([64, 32, 16, 10], seed=0)
    params = model.parameters()
    buckets = GradientBuckets(params, bucket_bytes=600)
    flat = [p for bucket in buckets.buckets for p in bucket]
    assert flat == list(reversed(params))
    for bucket in buckets.buckets:
        size = sum(p.grad.size * 4 for p in bucket)
        assert size <= 600 or len(bucket) == 1
    with pytest.raises(ValueError, match="bucket_bytes"):
        GradientBuckets(params, bucket_bytes=0)
