"""The napkin math of collectives: how many bytes each rank sends and how long that should take.

The alpha-beta model: a message of m bytes costs ``alpha + m / beta`` (alpha the latency of one message,
beta the link's bandwidth).  The ring all-reduce of an n-byte buffer over N ranks runs 2(N-1) steps of
n/N bytes each, so

    t_ring = 2(N-1) * alpha + 2(N-1)/N * n / beta

The first term grows with the number of ranks and steps (why small buffers are bucketed together); the
second tends to 2n/beta however many ranks there are (why the ring scales).  ``fit_alpha_beta`` estimates
alpha and beta from measured times of single messages, so the model's figures are labelled *modelled* and
the timings it is compared with *measured*.
"""
import numpy as np


def ring_bytes_sent(nbytes, ranks):
    """Bytes each rank sends in a ring all-reduce of an ``nbytes`` buffer over ``ranks`` ranks."""
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    return 2.0 * (ranks - 1) / ranks * nbytes


def ring_seconds(nbytes, ranks, alpha, beta):
    """The alpha-beta model's time for a ring all-reduce (alpha seconds per message, beta bytes/s)."""
    if ranks == 1:
        return 0.0
    return 2 * (ranks - 1) * alpha + ring_bytes_sent(nbytes, ranks) / beta


def naive_seconds(nbytes, ranks, alpha, beta):
    """Reduce to rank 0 then broadcast, one message at a time: 2(N-1) messages of the whole buffer."""
    if ranks == 1:
        return 0.0
    return 2 * (ranks - 1) * (alpha + nbytes / beta)


def bus_bandwidth(nbytes, ranks, seconds):
    """NCCL-tests' "bus bandwidth" of an all-reduce: the bytes each rank sent per second.

    Comparable across rank counts: it approaches the link bandwidth when the ring is bandwidth-bound.
    """
    if seconds <= 0:
        raise ValueError("seconds must be positive")
    return ring_bytes_sent(nbytes, ranks) / seconds


def fit_alpha_beta(nbytes, seconds):
    """Least-squares alpha (s) and beta (bytes/s) from single-message times ``seconds`` at sizes ``nbytes``."""
    nbytes, seconds = np.asarray(nbytes, float), np.asarray(seconds, float)
    if nbytes.shape != seconds.shape or nbytes.size < 2 or len(np.unique(nbytes)) < 2:
        raise ValueError("fit_alpha_beta needs times for at least two different message sizes")
    slope, intercept = np.polyfit(nbytes, seconds, 1)
    if slope <= 0:
        raise ValueError("the times do not grow with the message size: measure larger messages")
    return max(float(intercept), 0.0), 1.0 / float(slope)


def pipeline_bubble(stages, micro_batches):
    """GPipe's idle fraction with equal stages: (p - 1) / (m + p - 1)."""
    if stages < 1 or micro_batches < 1:
        raise ValueError("stages and micro_batches must be at least 1")
    return (stages - 1) / (micro_batches + stages - 1)
