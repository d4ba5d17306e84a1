"""Reading an LR sweep's curve: every rule's pick (``suggest``), in linear or n log n
time in the number of points, so a long sweep is read at once and a Stop is heard."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import NNxError

__all__ = ["RULES", "SuggestionStopped", "suggest", "warmup_points"]

RULES = ("valley", "min_div_10", "steepest", "linear_slope")

# Every rule is linear in the points or n log n (the valley's bisections): a 30,000-point
# sweep is read in milliseconds, not minutes.
WARMUP_FRACTION = 10  # the slope rules skip the first tenth of the points (fastai's num_it//10)
STOP_EVERY = 1024  # the valley looks at a stop request this often (points)


def warmup_points(n: int) -> int:
    """How many leading points the slope rules skip: a tenth (fastai skips
    ``num_it // 10``). There the bias-corrected moving average holds only a few steps, so
    its slope is noise, and on an exponential schedule the rates are so close together
    that noise divided by their spacing looks like the steepest descent of the sweep."""
    return n // WARMUP_FRACTION


class SuggestionStopped(NNxError, RuntimeError):
    """A stop was requested while the curve was being read; ``args[0]``: the picks of
    the rules read before it (the sweep turns it into a stopped result)."""


def _valley(
    lrs: np.ndarray, losses: np.ndarray, stop: Callable[[], bool] | None = None
) -> float | None:
    """The longest stretch over which the loss keeps going down (a longest strictly
    decreasing subsequence), and the point two thirds of the way along it.

    Ties are broken as the plain double loop does (each point extends the earliest point
    of the longest chain it can extend; the first longest chain wins), in n log n: the
    points whose longest chain has length k come in index order with non-decreasing
    losses, so the earliest one that a point can extend is found by bisection."""
    n = len(losses)
    if n < 3:
        return None
    neg_tails: list[float] = []  # -(the highest loss ending a chain of length k + 1)
    by_length: list[tuple[list[float], list[int]]] = []  # per length: losses, chain starts
    best_len, best_end, best_begin = 0, 0, 0
    values = losses.tolist()
    for i, v in enumerate(values):
        if stop is not None and i % STOP_EVERY == 0 and stop():
            raise SuggestionStopped
        k = bisect.bisect_left(neg_tails, -v)  # chains of length k end above v
        if k:
            level_losses, level_starts = by_length[k - 1]
            begin = level_starts[bisect.bisect_right(level_losses, v)]
        else:
            begin = i
        if k == len(neg_tails):
            neg_tails.append(-v)
            by_length.append(([v], [begin]))
        else:
            neg_tails[k] = -v
            by_length[k][0].append(v)
            by_length[k][1].append(begin)
        if k + 1 > best_len:
            best_len, best_end, best_begin = k + 1, i, begin
    if best_len < 3:
        return None
    return float(lrs[best_begin + (best_end - best_begin) * 2 // 3])


def _steepest(x: np.ndarray, lrs: np.ndarray, losses: np.ndarray) -> float | None:
    """The steepest descent after the warm-up points; None ("no slope found") when the
    curve never goes down there, or when its steepest point is the window's edge (the
    descent may go on past it: an edge is where the sweep began or ended, not a slope)."""
    n = len(losses)
    if n < 3:
        return None
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        slopes = np.gradient(losses, x)
    skip = warmup_points(n)
    window = slopes[skip:]
    finite = np.isfinite(window)
    if not finite.any():
        return None
    i = int(np.argmin(np.where(finite, window, np.inf)))
    if not window[i] < 0 or i == 0 or i == len(window) - 1:
        return None
    return float(lrs[skip + i])


def suggest(
    lrs: Sequence[float], smoothed: Sequence[float], *, stop: Callable[[], bool] | None = None
) -> dict[str, float | None]:
    """Every rule's pick on a curve (finite points only); None where a rule finds none.
    ``stop``: asked now and then while the valley is read; when it says True the rules
    not yet read stay None and ``SuggestionStopped`` is raised with the partial picks
    (``exc.args[0]``)."""
    lr = np.asarray(lrs, dtype=np.float64)
    loss = np.asarray(smoothed, dtype=np.float64)
    keep = np.isfinite(loss) & np.isfinite(lr) & (lr > 0)
    lr, loss = lr[keep], loss[keep]
    picks: dict[str, float | None] = dict.fromkeys(RULES)
    if len(loss) == 0:
        return picks
    # the vectorised rules first: a stop during the valley keeps them
    picks["min_div_10"] = float(lr[int(np.argmin(loss))] / 10.0)
    picks["steepest"] = _steepest(np.log10(lr), lr, loss)
    picks["linear_slope"] = _steepest(lr, lr, loss)
    try:
        picks["valley"] = _valley(lr, loss, stop)
    except SuggestionStopped:
        raise SuggestionStopped(picks) from None
    return {rule: picks[rule] for rule in RULES}
