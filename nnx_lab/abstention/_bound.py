"""An upper confidence bound on a selective risk, and the guaranteed-risk threshold search
(selection with guaranteed risk, Geifman and El-Yaniv 2017).

With ``k`` errors among ``n`` accepted rows, the one-sided Clopper-Pearson bound at level
``1 - delta`` is the risk ``b`` at which seeing ``k`` or fewer errors has probability
``delta``: ``P(Binomial(n, b) <= k) = delta``. The search tests ``ceil(log2 G)``
thresholds by bisection over the G candidate thresholds, each at ``delta / tests``, so by
the union bound every tested bound holds at once with probability at least
``1 - delta``.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["clopper_pearson_upper", "guaranteed_threshold"]


def _log_cdf(k: int, n: int, p: float, log_comb: np.ndarray) -> float:
    """log P(Binomial(n, p) <= k)."""
    j = np.arange(k + 1, dtype=np.float64)
    terms = log_comb + j * math.log(p) + (n - j) * math.log1p(-p)
    top = terms.max()
    return float(top + math.log(np.exp(terms - top).sum()))


def clopper_pearson_upper(errors: int, n: int, delta: float) -> float:
    """The one-sided ``1 - delta`` Clopper-Pearson upper bound on the error rate, from
    ``errors`` errors in ``n`` trials (1.0 when ``n`` is 0 or every trial is an error)."""
    if not 0 < delta < 1:
        raise ValueError(f"delta={delta} must lie in (0, 1)")
    if not 0 <= errors <= n:
        raise ValueError(f"errors={errors} must lie in [0, n={n}]")
    if n == 0 or errors == n:
        return 1.0
    if errors == 0:
        return -math.expm1(math.log(delta) / n)  # 1 - delta^(1/n), exactly solvable
    i = np.arange(1, errors + 1, dtype=np.float64)
    log_comb = np.concatenate([[0.0], np.cumsum(np.log(n - i + 1) - np.log(i))])
    target = math.log(delta)
    lo, hi = errors / n, 1.0  # the CDF falls from >= ~1/2 at k/n to 0 at 1
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if _log_cdf(errors, n, mid, log_comb) > target:
            lo = mid
        else:
            hi = mid
    return hi


def guaranteed_threshold(
    accepted: np.ndarray, errors: np.ndarray, ceiling: float, guarantee: float
) -> tuple[int | None, float | None, int, list[tuple[int, float]]]:
    """SGR over candidates ordered from the lowest threshold (most accepted) up.

    Returns (index of the chosen candidate or None, its bound, tests, every (index,
    bound) tested). The choice is the tested candidate with the most accepted rows whose
    bound is at most ``ceiling``.
    """
    g = int(accepted.shape[0])
    tests = max(1, math.ceil(math.log2(g))) if g > 1 else 1
    delta = (1.0 - guarantee) / tests
    z_min, z_max = 0, g - 1
    tested: list[tuple[int, float]] = []
    for _ in range(tests):
        z = math.ceil((z_min + z_max) / 2)
        bound = clopper_pearson_upper(int(errors[z]), int(accepted[z]), delta)
        tested.append((z, bound))
        if bound <= ceiling:
            z_max = z  # try a lower threshold: more coverage
        else:
            z_min = z
    passing = [(z, b) for z, b in tested if b <= ceiling]
    if not passing:
        return None, None, tests, tested
    best = max(passing, key=lambda zb: int(accepted[zb[0]]))
    return best[0], best[1], tests, tested
