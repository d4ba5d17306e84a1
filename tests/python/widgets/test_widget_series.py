"""BucketSeries: the bounded, decimated history a widget keeps (nnx_lab/widgets/_series.py)."""

from __future__ import annotations

import numpy as np
import pytest

from nnx_lab.widgets._series import BucketSeries, Change, ColumnSpec, Reduce


def steps(capacity: int) -> BucketSeries:
    return BucketSeries(
        [
            ColumnSpec("first", "int32", Reduce.FIRST),
            ColumnSpec("step", "int32", Reduce.LAST),
            ColumnSpec("loss", "float32", Reduce.MEAN),
            ColumnSpec("lr", "float32", Reduce.LAST),
            ColumnSpec("n", "int32", Reduce.SUM),
            ColumnSpec("bad", "int32", Reduce.SUM),
        ],
        capacity=capacity,
        bad="bad",
    )


def feed(series: BucketSeries, loss: np.ndarray, batches: list[int]) -> None:
    """Add raw points 1..len(loss) in batches of the given sizes (cycled)."""
    i, k = 0, 0
    while i < len(loss):
        n = min(batches[k % len(batches)], len(loss) - i)
        s = np.arange(i + 1, i + n + 1)
        series.extend({"first": s, "step": s, "loss": loss[i : i + n], "lr": s * 1e-3})
        i, k = i + n, k + 1


def reference(loss: np.ndarray, width: int):
    """Buckets of `width` raw points, computed directly from the raw values."""
    out = {"first": [], "step": [], "loss": [], "loss:min": [], "loss:max": [], "n": [], "bad": []}
    for start in range(0, len(loss), width):
        chunk = loss[start : start + width]
        finite = chunk[np.isfinite(chunk)]
        out["first"].append(start + 1)
        out["step"].append(start + len(chunk))
        out["loss"].append(finite.mean() if len(finite) else np.nan)
        out["loss:min"].append(finite.min() if len(finite) else np.nan)
        out["loss:max"].append(finite.max() if len(finite) else np.nan)
        out["n"].append(len(chunk))
        out["bad"].append(len(chunk) - len(finite))
    return out


def test_exact_while_it_fits():
    s = steps(16)
    loss = np.array([3.0, 1.0, np.nan, 4.0, 1.0, 5.0])
    feed(s, loss, [4])
    assert (s.length, s.width, s.total) == (6, 1, 6)
    assert s.column("step").tolist() == [1, 2, 3, 4, 5, 6]
    np.testing.assert_array_equal(s.column("loss"), loss.astype(np.float32))
    assert s.column("bad").tolist() == [0, 0, 1, 0, 0, 0]
    assert s.column("lr")[3] == pytest.approx(4e-3)


@pytest.mark.parametrize("batches", [[1], [7], [50, 3, 1, 200], [1000]])
def test_decimated_buckets_equal_the_buckets_of_the_raw_points(batches):
    rng = np.random.default_rng(0)
    loss = rng.random(10_007) + 1.0
    loss[[37, 4_101, 9_999]] = [50.0, 80.0, -30.0]  # spikes inside buckets, not on their edges
    loss[[500, 501, 502, 503, 6_000]] = np.nan  # non-finite steps
    loss[7_000] = np.inf
    s = steps(1_000)
    feed(s, loss, batches)
    assert s.length <= 1_000
    assert s.width == 16  # 10,007 points in at most 1,000 buckets
    assert s.total == 10_007
    expected = reference(loss, s.width)
    assert s.length == len(expected["step"])
    for name, values in expected.items():
        np.testing.assert_allclose(
            s.column(name), np.asarray(values, dtype=np.float64), rtol=2e-6, err_msg=name
        )
    assert np.nanmax(s.column("loss:max")) == 80.0
    assert np.nanmin(s.column("loss:min")) == -30.0
    assert int(s.column("bad").sum()) == 6


def test_a_bucket_of_only_non_finite_losses_is_a_gap():
    s = steps(4)
    feed(s, np.array([1.0, 1.0, 1.0, 1.0, np.nan, np.nan, np.nan, np.nan]), [8])
    assert s.width == 2
    loss = s.column("loss")
    assert loss[:2].tolist() == [1.0, 1.0]
    assert np.isnan(loss[2:]).all()
    assert s.column("bad").tolist() == [0, 0, 2, 2]


def test_memory_does_not_grow_with_the_run():
    s = steps(1_000)
    before = s.nbytes()
    feed(s, np.ones(200_000), [500])
    assert s.nbytes() == before == 1_000 * (6 + 2) * 4
    assert s.length <= 1_000


def test_changes_say_which_rows_the_views_must_replace():
    s = steps(8)
    assert s.take_changes() is None
    feed(s, np.ones(5), [5])
    assert s.take_changes() == Change(at=0, count=5)
    assert s.take_changes() is None
    feed(s, np.ones(2), [2])
    assert s.take_changes() == Change(at=5, count=2)  # appended rows only
    feed(s, np.ones(3), [3])  # 10 points: the series halved (width 2)
    assert s.width == 2
    assert s.take_changes() == Change(at=0, count=5)
    feed(s, np.ones(1), [1])  # the last bucket was full: a new one opens
    assert s.take_changes() == Change(at=5, count=1)
    feed(s, np.ones(1), [1])  # fills the open bucket: that row changes
    assert s.take_changes() == Change(at=5, count=1)
    s.clear()
    assert s.take_changes() == Change(at=0, count=0)  # the views drop their rows


def test_a_column_added_later_resends_every_row():
    s = BucketSeries(
        [ColumnSpec("epoch", "int32", Reduce.LAST), ColumnSpec("n", "int32", Reduce.SUM)],
        capacity=4,
    )
    s.extend({"epoch": [1, 2]})
    s.take_changes()
    s.add_value("val.loss")
    s.extend({"epoch": [3], "val.loss": [0.5]})
    assert s.take_changes() == Change(at=0, count=3)
    assert s.fields == ["epoch", "n", "val.loss", "val.loss:min", "val.loss:max"]
    assert np.isnan(s.column("val.loss")[:2]).all()
    assert s.column("val.loss")[2] == 0.5
    with pytest.raises(ValueError, match="exists already"):
        s.add_value("val.loss")


def test_capacity_is_checked():
    with pytest.raises(ValueError, match="capacity=5"):
        steps(5)
    with pytest.raises(ValueError, match="weight column 'n'"):
        BucketSeries([ColumnSpec("x", "int32", Reduce.LAST)], capacity=4)
