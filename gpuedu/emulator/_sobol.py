"""Direction vectors and scramble constants for the emulator's Sobol generators (``curandom``).

cuRAND's host library hands out Joe and Kuo's published direction numbers; the emulator computes its own, the
way Sobol's construction defines them, so that each dimension is a true Sobol sequence (a (0, 1)-sequence in
base 2: every 2^k consecutive points, from a multiple of 2^k, put one point in each interval [j/2^k, (j+1)/2^k)):

- dimension 0 is the van der Corput sequence (every direction number 1: the same as cuRAND's first dimension);
- dimension d >= 1 uses the d-th primitive polynomial over GF(2), in order of degree and then of value,
  x^s + a_1 x^(s-1) + ... + a_(s-1) x + 1, and initial direction numbers m_1 .. m_s, each odd and below 2^k,
  drawn from a generator seeded with d (fixed: the same in every run); the rest follow Sobol's recurrence
  m_k = 2 a_1 m_(k-1) ^ 4 a_2 m_(k-2) ^ ... ^ 2^s m_(k-s) ^ m_(k-s), and v_k = m_k * 2^(bits - k).

So dimension 0 matches a GPU's draw for draw; the others are Sobol sequences of their own, with the same
one-dimensional distribution as cuRAND's but other points (the joint quality of many dimensions, which Joe and
Kuo's search optimised, is not claimed). The scrambled sets multiply each dimension's vectors by a random
lower-triangular binary matrix with a unit diagonal (Matousek's left matrix scrambling, which keeps the
(0, 1)-sequence property); the scramble constants are random words. Both are fixed, as cuRAND's are.
"""
import functools

import numpy as np

#: cuRAND's direction vector sets hold this many dimensions.
MAX_DIMENSIONS = 20000

_SEED = 0x5EED_50B0


def _mulmod(a, b, poly, degree):
    """a * b modulo poly in GF(2)[x] (a, b of degree < degree; polynomials as bit masks)."""
    top = 1 << degree
    r = 0
    while b:
        if b & 1:
            r ^= a
        b >>= 1
        a <<= 1
        if a & top:
            a ^= poly
    return r


def _powmod(a, e, poly, degree):
    r = 1
    while e:
        if e & 1:
            r = _mulmod(r, a, poly, degree)
        a = _mulmod(a, a, poly, degree)
        e >>= 1
    return r


def _prime_factors(n):
    factors, p = [], 2
    while p * p <= n:
        if n % p == 0:
            factors.append(p)
            while n % p == 0:
                n //= p
        p += 1
    if n > 1:
        factors.append(n)
    return factors


def _is_primitive(poly, degree):
    """Whether x generates the multiplicative group of GF(2)[x] / poly: its order is 2^degree - 1."""
    if degree == 1:
        return poly == 0b11
    order = (1 << degree) - 1
    x = 0b10
    if _powmod(x, order, poly, degree) != 1:
        return False
    return all(_powmod(x, order // q, poly, degree) != 1 for q in _prime_factors(order))


@functools.lru_cache(maxsize=None)
def _polynomials(count):
    """The first ``count`` primitive polynomials, as (degree, mask with the x^degree and 1 terms), by degree then value."""
    found, degree = [], 1
    while len(found) < count:
        for poly in range((1 << degree) | 1, 1 << (degree + 1), 2):   # constant term 1
            if _is_primitive(poly, degree):
                found.append((degree, poly))
                if len(found) == count:
                    break
        degree += 1
    return tuple(found)


def _dimension(d, bits, scrambled, polynomials):
    """The ``bits`` direction vectors of dimension ``d`` (Python ints); ``polynomials`` holds at least d."""
    if d == 0:
        m = [1] * bits
    else:
        degree, poly = polynomials[d - 1]
        rng = np.random.default_rng([_SEED, d])
        m = [2 * int(rng.integers(0, 1 << (k - 1))) + 1 for k in range(1, degree + 1)]
        a = [(poly >> (degree - i)) & 1 for i in range(1, degree)]        # a_1 .. a_(s-1)
        for k in range(degree, bits):
            new = m[k - degree] ^ (m[k - degree] << degree)
            for i in range(1, degree):
                if a[i - 1]:
                    new ^= m[k - i] << i
            m.append(new)
    v = [m[k] << (bits - 1 - k) for k in range(bits)]
    if scrambled:
        rng = np.random.default_rng([_SEED, d, bits, 1])
        # column i of L: the bit at position bits-1-i set, random bits below it
        words = rng.integers(0, 1 << 32, (bits, 2), dtype=np.uint64)
        columns = [(1 << (bits - 1 - i)) | ((int(hi) << 32 | int(lo)) & ((1 << (bits - 1 - i)) - 1))
                   for i, (hi, lo) in enumerate(words)]
        v = [_left_multiply(columns, x, bits) for x in v]
    return v


def _left_multiply(columns, x, bits):
    out = 0
    for i in range(bits):
        if (x >> (bits - 1 - i)) & 1:
            out ^= columns[i]
    return out


@functools.lru_cache(maxsize=16)
def _table(count, bits, scrambled):
    dtype = np.uint64 if bits == 64 else np.uint32
    polynomials = _polynomials(count - 1)
    table = np.array([_dimension(d, bits, scrambled, polynomials) for d in range(count)],
                     dtype=dtype).reshape(count, bits)
    table.flags.writeable = False
    return table


def _check_count(count, what):
    n = int(count)
    if n != count or not 0 < n <= MAX_DIMENSIONS:
        raise ValueError(f"{what}: count must be a whole number of dimensions from 1 to {MAX_DIMENSIONS} "
                         f"(cuRAND's limit), got {count!r}")
    return n


def direction_vectors(count, bits=32, scrambled=False):
    """A (count, bits) array of direction vectors (uint32 for 32 bits, uint64 for 64), one row per dimension."""
    if bits not in (32, 64):
        raise ValueError(f"direction vectors have 32 or 64 bits, not {bits!r}")
    return _table(_check_count(count, "direction_vectors"), bits, bool(scrambled)).copy()


def scramble_constants(count, bits=32):
    """``count`` random scramble constants of ``bits`` bits (fixed: the same in every run)."""
    count = _check_count(count, "scramble_constants")
    rng = np.random.default_rng([_SEED, bits, 2])
    if bits == 32:
        return rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)
    return rng.integers(0, np.iinfo(np.uint64).max, count, dtype=np.uint64, endpoint=True)
