"""The LR finder's rules on known curves: the same picks as the plain definitions, in
one pass (a 200,000-point curve is read in the test's normal run), the slope rules past
the warm-up and honest when they find no slope, and a Stop heard while the curve is
read (issue 21 §1, §10)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nnx_lab.lr_sweep import RULES, suggest, warmup_points
from nnx_lab.lr_sweep._rules import STOP_EVERY, SuggestionStopped


# -- the plain definitions, written out as simply as possible --------------------------------
def reference_valley(lrs, losses):
    """The double loop the valley rule was: the longest strictly decreasing subsequence
    (each point extends the earliest chain of the greatest length), 2/3 along it."""
    n = len(losses)
    if n < 3:
        return None
    length, start = [1] * n, list(range(n))
    for i in range(1, n):
        for j in range(i):
            if losses[j] > losses[i] and length[j] + 1 > length[i]:
                length[i], start[i] = length[j] + 1, start[j]
    end = max(range(n), key=lambda i: (length[i], -i))
    if length[end] < 3:
        return None
    begin = start[end]
    return float(lrs[begin + (end - begin) * 2 // 3])


def reference_slope(x, lrs, losses):
    """The steepest descent after the first tenth of the points; None when the curve
    does not descend there or is steepest at that window's first or last point."""
    n = len(losses)
    if n < 3:
        return None
    slopes = np.gradient(np.asarray(losses, float), np.asarray(x, float))
    skip = n // 10
    best = None
    for i in range(skip, n):
        if math.isfinite(slopes[i]) and (best is None or slopes[i] < slopes[best]):
            best = i
    if best is None or slopes[best] >= 0 or best in (skip, n - 1):
        return None
    return float(lrs[best])


def curves():
    """Curves a sweep draws: a clean descent and rise, the same with noise, a plateau
    with ties, one that only rises, a short one, and a rough random walk."""
    rng = np.random.default_rng(21)
    lrs = np.logspace(-7, 1, 100)
    x = np.log10(lrs)
    clean = 2.0 - np.tanh((x + 3.0) * 1.5) + np.where(x > -1, (x + 1) ** 2 * 5, 0.0)
    yield "clean", lrs, clean
    yield "noisy", lrs, clean + rng.normal(0, 0.02, lrs.size)
    yield "ties", lrs, np.round(clean, 1)
    yield "rising", lrs, 1.0 + 0.1 * np.arange(lrs.size)
    yield "short", lrs[:7], clean[:7][::-1]
    walk = np.logspace(-6, 0, 400)
    yield "walk", walk, 3.0 + np.cumsum(rng.normal(-0.01, 0.05, walk.size))


@pytest.mark.parametrize(("name", "lrs", "losses"), list(curves()), ids=[c[0] for c in curves()])
def test_every_rule_picks_what_its_plain_definition_picks(name, lrs, losses):
    got = suggest(lrs, losses)
    assert list(got) == list(RULES)
    assert got["valley"] == reference_valley(lrs, losses)
    assert got["min_div_10"] == pytest.approx(lrs[int(np.argmin(losses))] / 10)
    assert got["steepest"] == reference_slope(np.log10(lrs), lrs, losses)
    assert got["linear_slope"] == reference_slope(lrs, lrs, losses)


def test_the_valley_matches_the_double_loop_on_many_random_curves():
    rng = np.random.default_rng(0)
    for trial in range(400):
        n = int(rng.integers(1, 80))
        if trial % 3 == 0:  # many equal values: the tie-breaking matters
            losses = rng.integers(0, 5, n).astype(float)
        else:
            losses = np.cumsum(rng.normal(size=n))
        lrs = np.logspace(-6, 0, n) if n > 1 else np.array([1e-3])
        assert suggest(lrs, losses)["valley"] == reference_valley(lrs, losses), losses


def test_a_200000_point_curve_is_read_in_one_pass():
    """A double loop would take hours here (2e10 comparisons). The valley reads the
    curve once: it asks about a stop once per STOP_EVERY points, no more."""
    n = 200_000
    lrs = np.logspace(-7, 1, n)
    x = np.log10(lrs)
    losses = 2.0 - np.tanh(x + 3.0) + np.where(x > -1, (x + 1) ** 2, 0.0)
    asked = []

    def stop():
        asked.append(1)
        return False

    got = suggest(lrs, losses, stop=stop)
    assert len(asked) == math.ceil(n / STOP_EVERY)
    assert 1e-4 < got["valley"] < 1e-1
    assert got["steepest"] == pytest.approx(1e-3, rel=0.01)


def test_the_slope_rules_skip_the_warm_up_and_never_name_the_first_point():
    # an exponential sweep whose first points are noise over a tiny spacing: against
    # the learning rate itself that noise looks like the steepest slope of all
    rng = np.random.default_rng(3)
    lrs = np.logspace(-7, 1, 100)
    x = np.log10(lrs)
    losses = 2.3 - 0.8 * np.tanh((x + 2.5) * 2) + rng.normal(0, 0.01, lrs.size)
    old = float(lrs[int(np.argmin(np.gradient(losses, lrs)))])
    assert old == lrs[0] or old < lrs[warmup_points(100)]  # what the rule used to say
    got = suggest(lrs, losses)
    assert warmup_points(100) == 10
    for rule in ("steepest", "linear_slope"):
        assert got[rule] is None or got[rule] > lrs[warmup_points(100)], rule
    assert got["steepest"] == pytest.approx(10**-2.5, rel=0.3)


def test_a_curve_without_a_descent_has_no_slope():
    lrs = np.logspace(-5, 0, 50)
    got = suggest(lrs, 1.0 + np.linspace(0, 1, 50) ** 2)
    assert got["steepest"] is None
    assert got["linear_slope"] is None
    # still descending at its last point: the steepest descent is the edge, not a slope
    falling = suggest(lrs, 3.0 - np.linspace(0, 1, 50) ** 3)
    assert falling["steepest"] is None


def test_a_stop_while_the_curve_is_read_keeps_the_rules_already_read():
    lrs = np.logspace(-7, 1, 5000)
    losses = 2.0 - np.tanh(np.log10(lrs) + 3.0)
    with pytest.raises(SuggestionStopped) as info:
        suggest(lrs, losses, stop=lambda: True)
    picks = info.value.args[0]
    assert picks["valley"] is None
    assert picks["min_div_10"] is not None
    assert picks["steepest"] is not None


class StopAtTheLastPoint:
    """A sweep sink that asks for a stop once the last step is reported: the steps are
    over, the curve is being read."""

    def __init__(self, num_iter: int, stop) -> None:
        self.num_iter, self.stop = num_iter, stop
        self.finished = None

    def on_sweep_points(self, event) -> None:
        if any(p[0] == self.num_iter - 1 for p in event.points):
            self.stop()

    def on_sweep_finished(self, event) -> None:
        self.finished = event


def test_a_stop_after_the_last_step_ends_the_reading_of_the_curve(monkeypatch):
    import engine_factories as f

    from nnx_lab import TrainingControl, lr_finder
    from nnx_lab.lr_sweep import _rules

    monkeypatch.setattr(_rules, "STOP_EVERY", 1)  # asked at every point of a short curve
    loader, _ = f.loaders()
    control = TrainingControl()
    sink = StopAtTheLastPoint(30, lambda: control.request_stop("stopped by the test"))
    result = lr_finder(
        f.model().net, loader, num_iter=30, end_lr=1.0, control=control, callbacks=[sink]
    )
    assert len(result.lrs) == 30  # every step ran
    assert result.status == "stopped" == sink.finished.status
    assert result.reason == (
        "stopped by the test while the curve was read: the valley rule was not computed"
    )
    assert result.suggestions["valley"] is None
    assert result.suggestions["min_div_10"] is not None  # the rules read before it stay
    assert result.suggested_lr == result.suggestions[result.rule]
