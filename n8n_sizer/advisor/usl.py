"""Universal Scalability Law (Gunther): X(N) = lambda N / (1 + sigma (N - 1) + kappa N (N - 1)).

sigma is contention (serialised work), kappa coherency (crosstalk: every added worker makes every other
one slower). Fitted with both bounded >= 0. Three parameters need more than three distinct N to say
anything, so fitting refuses below MIN_DISTINCT_N and says which bench run would supply the missing points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_DISTINCT_N = 4


class TooFewPointsForUsl(ValueError):
    pass


@dataclass(frozen=True)
class UslModel:
    lambda_per_s: float
    sigma: float
    kappa: float

    def throughput_at(self, n: float) -> float:
        """X(N), executions per second with N workers (USL, eq. 1)."""
        return self.lambda_per_s * n / (1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0))

    def max_useful_concurrency(self) -> float:
        """N* = sqrt((1 - sigma) / kappa): past it, adding workers lowers throughput. Infinite when kappa = 0."""
        if self.kappa <= 0.0:
            return math.inf
        return math.sqrt(max(1.0 - self.sigma, 0.0) / self.kappa)


def fit_usl(points: list[tuple[float, float]], *, what: str, how_to_get_more: str) -> UslModel:
    """Fit (N, X) points; refuse with a message naming the missing measurements when too few."""
    distinct = sorted({n for n, _ in points})
    if len(distinct) < MIN_DISTINCT_N:
        have = ", ".join(f"{n:g}" for n in distinct) or "none"
        raise TooFewPointsForUsl(
            f"contention (USL) for {what} not fitted: {len(distinct)} distinct worker count(s) measured ({have}), "
            f"it needs {MIN_DISTINCT_N}; {how_to_get_more}"
        )
    import numpy as np
    from scipy.optimize import least_squares

    n = np.array([p[0] for p in points], dtype=float)
    x = np.array([p[1] for p in points], dtype=float)
    lam0 = float(max(x[n == n.min()]) / n.min())

    def residuals(theta: np.ndarray) -> np.ndarray:
        lam, sigma, kappa = theta
        return np.log(lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))) - np.log(x)

    fit = least_squares(residuals, [lam0, 0.01, 0.001], bounds=([1e-9, 0.0, 0.0], [np.inf, 1.0, np.inf]))
    lam, sigma, kappa = (float(v) for v in fit.x)
    return UslModel(lambda_per_s=lam, sigma=sigma, kappa=kappa)
