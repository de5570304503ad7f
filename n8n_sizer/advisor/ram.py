"""Stack RAM from seed 000's idle and peak measurements (whole stack: n8n, runners, Postgres, Redis).

Queue mode: a straight line in the worker count, fitted by least squares to the 1/2/4-worker figures
(idle 703/919/1,377 MB; peak 1.2/1.8/2.8 GB). Regular mode: the idle figure (476 MB) and the peak with a
production limit (0.9 GB). Regular mode without a limit has no bound once the offered rate passes
capacity: main holds every waiting request (354 MB -> 6.9 GB in 3 minutes, seed 000), which the advisor
reports as a warning rather than a number.
"""

from __future__ import annotations

from dataclasses import dataclass

from n8n_sizer.advisor.measurements import Measurement
from n8n_sizer.advisor.setup import Setup


@dataclass(frozen=True)
class RamModel:
    regular_idle_mb: float
    regular_peak_mb: float
    queue_idle_mb: tuple[float, float]  # intercept, per worker
    queue_peak_mb: tuple[float, float]
    evidence: tuple[str, ...]
    # RAM main holds per execution it has started and not finished (regular mode): seed 000's main grew from
    # 354 MB to 6.9 GB with the load generator's 1,000 requests in flight and no production limit, ~6.5 MB each;
    # with a limit of 10 the same load kept main at 674 MB (the waiting requests cost little).
    held_mb_per_execution: float = 6.5

    def idle_mb(self, setup: Setup) -> float:
        if setup.mode == "regular":
            return self.regular_idle_mb
        a, b = self.queue_idle_mb
        return a + b * setup.workers

    def peak_mb(self, setup: Setup) -> float:
        if setup.mode == "regular":
            return self.regular_peak_mb
        a, b = self.queue_peak_mb
        return a + b * setup.workers


def _line(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Ordinary least squares y = a + b x (intercept, slope)."""
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    slope = sum((p[0] - mx) * (p[1] - my) for p in points) / sxx
    return my - slope * mx, slope


def fit_ram(measurements: list[Measurement] | tuple[Measurement, ...]) -> RamModel:
    """Fit the RAM lines from measurements carrying idle_ram_mb / peak_ram_mb (seed 000's tables)."""
    idle_q: list[tuple[int, float]] = []
    peak_q: list[tuple[int, float]] = []
    regular_idle: list[float] = []
    regular_peak: list[float] = []
    used: list[str] = []
    for m in measurements:
        r, s = m.results, m.setup
        if r.idle_ram_mb is not None:
            used.append(m.id)
            (idle_q.append((s.workers, r.idle_ram_mb)) if s.mode == "queue" else regular_idle.append(r.idle_ram_mb))
        if r.peak_ram_mb is not None:
            if s.mode == "queue":
                used.append(m.id)
                peak_q.append((s.workers, r.peak_ram_mb))
            elif s.production_limit is not None:  # without a limit the peak measures the backlog, not the stack
                used.append(m.id)
                regular_peak.append(r.peak_ram_mb)
    held = [
        ((r.main_ram_mb[-1] - r.main_ram_mb[0]) / m.load.max_in_flight, m.id)
        for m in measurements
        for r in [m.results]
        if m.setup.mode == "regular"
        and m.setup.production_limit is None
        and r.main_ram_mb
        and len(r.main_ram_mb) >= 2
        and m.load.max_in_flight
    ]
    used += [i for _, i in held]
    if len({w for w, _ in idle_q}) < 2 or len({w for w, _ in peak_q}) < 2 or not regular_idle or not regular_peak:
        raise ValueError("RAM model needs idle and peak figures for regular mode and >= 2 worker counts in queue mode")
    return RamModel(
        regular_idle_mb=max(regular_idle),
        regular_peak_mb=max(regular_peak),
        queue_idle_mb=_line(idle_q),
        queue_peak_mb=_line(peak_q),
        evidence=tuple(used),
        **({"held_mb_per_execution": max(v for v, _ in held)} if held else {}),
    )
