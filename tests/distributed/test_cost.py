"""The alpha-beta napkin math of the ring all-reduce and the pipeline bubble."""
import numpy as np
import pytest

from gpuedu.distributed import cost


def test_ring_sends_two_n_minus_one_over_n_of_the_buffer():
    assert cost.ring_bytes_sent(1000, 1) == 0
    assert cost.ring_bytes_sent(1000, 2) == 1000
    assert cost.ring_bytes_sent(1000, 4) == 1500
    # it tends to twice the buffer, however many ranks
    assert cost.ring_bytes_sent(1000, 1000) == pytest.approx(1998)


def test_ring_beats_reduce_then_broadcast_for_large_buffers_only_in_bandwidth():
    alpha, beta = 5e-6, 10e9
    big, small = 1 << 28, 64
    assert cost.ring_seconds(big, 8, alpha, beta) < cost.naive_seconds(big, 8, alpha, beta) / 3
    # both pay 2(N-1) latencies: for a tiny buffer they cost about the same
    assert cost.ring_seconds(small, 8, alpha, beta) == pytest.approx(cost.naive_seconds(small, 8, alpha, beta), rel=0.01)
    assert cost.ring_seconds(big, 1, alpha, beta) == 0.0


def test_fit_alpha_beta_recovers_a_line():
    sizes = np.array([1e3, 1e4, 1e5, 1e6])
    alpha, beta = cost.fit_alpha_beta(sizes, 2e-6 + sizes / 4e9)
    assert alpha == pytest.approx(2e-6, rel=1e-6) and beta == pytest.approx(4e9, rel=1e-6)
    with pytest.raises(ValueError, match="two different"):
        cost.fit_alpha_beta([10, 10], [1, 2])
    with pytest.raises(ValueError, match="do not grow"):
        cost.fit_alpha_beta([10, 20], [2, 1])


def test_bus_bandwidth_and_bubble():
    assert cost.bus_bandwidth(1000, 4, 1.5e-6) == pytest.approx(1e9)
    assert cost.pipeline_bubble(1, 8) == 0
    assert cost.pipeline_bubble(2, 1) == 0.5
    assert cost.pipeline_bubble(4, 8) == pytest.approx(3 / 11)
    with pytest.raises(ValueError):
        cost.pipeline_bubble(0, 4)
