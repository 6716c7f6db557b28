"""Work and ideal memory traffic of a matmul: the arithmetic behind arithmetic intensity."""

from __future__ import annotations


def flops(m: int, n: int, k: int) -> int:
    """2*M*N*K: one multiply and one add per term of every dot product."""
    return 2 * m * n * k


def ideal_traffic_bytes(m: int, n: int, k: int, element_bytes: int, read_c: bool = False) -> int:
    """The ideal single-read model: A and B read once, C written once (and read once more
    for C = alpha*A@B + beta*C). A lower bound at the device-memory boundary, not a count of
    what the kernel's loads actually fetch."""
    elements = m * k + k * n + m * n * (2 if read_c else 1)
    return elements * element_bytes


def intensity(m: int, n: int, k: int, element_bytes: int, read_c: bool = False) -> float:
    """FLOP per byte of ideal traffic."""
    return flops(m, n, k) / ideal_traffic_bytes(m, n, k, element_bytes, read_c)


def tile_intensity(block_m: int, block_n: int, element_bytes: int = 4) -> float:
    """FLOP per byte a BLOCK_M x BLOCK_N tile does per K-slab it loads:
    2*BM*BN*BK / (bytes*(BM*BK + BK*BN)); BLOCK_K cancels. For float32, BM*BN / (2*(BM+BN))."""
    return 2 * block_m * block_n / (element_bytes * (block_m + block_n))


def slab_intensity(block_m: int, block_n: int, block_k: int, element_bytes: int = 4) -> float:
    """FLOP per byte of one K-step, BLOCK_K kept: 2*BM*BN*BK / (bytes*(BM*BK + BK*BN))."""
    flops = 2 * block_m * block_n * block_k
    return flops / (element_bytes * (block_m * block_k + block_k * block_n))


def tiled_traffic_bytes(
    m: int, n: int, k: int, block_m: int, block_n: int, element_bytes: int
) -> int:
    """Logical bytes a tiled kernel's loads and stores ask for: every program reads a
    BLOCK_M x K strip of A and a K x BLOCK_N strip of B and writes its tile once. Caches
    (L2) make the bytes that actually cross the memory bus fewer; only a profiler measures
    those."""
    programs = -(-m // block_m) * -(-n // block_n)
    return programs * (block_m + block_n) * k * element_bytes + m * n * element_bytes
