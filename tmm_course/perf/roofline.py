"""The roofline model: attainable FLOP/s = min(compute ceiling, intensity x bandwidth)."""

from __future__ import annotations

SYNTHETIC_PEAK_GFLOPS = 1000.0  # the roofline lab's made-up compute ceiling


def attainable(intensity: float, bandwidth: float, peak: float = SYNTHETIC_PEAK_GFLOPS) -> float:
    """GFLOP/s reachable at ``intensity`` FLOP/byte with ``bandwidth`` GB/s under ``peak``."""
    return min(peak, intensity * bandwidth)


def ridge(bandwidth: float, peak: float = SYNTHETIC_PEAK_GFLOPS) -> float:
    """The intensity (FLOP/byte) where the memory slope meets the compute ceiling."""
    return peak / bandwidth


def bound(intensity: float, bandwidth: float, peak: float = SYNTHETIC_PEAK_GFLOPS) -> str:
    """Return "memory" below the ridge, "compute" at or above it."""
    return "memory" if intensity < ridge(bandwidth, peak) else "compute"
