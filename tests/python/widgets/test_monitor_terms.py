"""The TrainingMonitor with a composite loss: each loss term (a step record's ``terms``,
a network's ``aux``) is its own step column beside the total, each optimizer's learning
rate (``lrs``) its own; the epoch summary's ``terms`` are epoch columns. Live and read
back from the log alike."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from nnx_lab.engine.events import EpochEnded, StepMetrics
from nnx_lab.runs import LogDamagedError
from nnx_lab.runs._events import event_from_json
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend, feed, scripted_run, write_jsonl

R1 = "7b1c" + "0" * 28


def _recon(step: int) -> float:
    return 2.0 / step


def _kl(step: int) -> float | None:
    return None if step == 5 else 0.1 * step  # one step without a value: a gap


def composite_run(*, loss_term: bool = False, **kw) -> list:
    """``scripted_run`` whose records carry two terms, an aux term and two optimizers' lrs."""
    out = []
    for event in scripted_run(run_id=R1, **kw):
        if isinstance(event, StepMetrics):
            records = tuple(
                dataclasses.replace(
                    r,
                    terms={"recon": _recon(r.step), "kl": _kl(r.step)},
                    aux={"load_balance": 0.5},
                    lrs={"G": r.lr, "D": r.lr / 4},
                )
                for r in event.records
            )
            event = StepMetrics(records=records)
        elif isinstance(event, EpochEnded):
            terms = {"recon": 1.5 * event.epoch, "kl": 0.25}
            if loss_term:
                terms["loss"] = 99.0
            event = dataclasses.replace(event, train={**event.train, "terms": terms})
        out.append(event)
    return out


def _plain(series: dict) -> dict:
    """The series with NaN as None, so two can be compared with ==."""
    return {
        k: [None if isinstance(v, float) and math.isnan(v) else v for v in col]
        for k, col in series.items()
    }


def _column(series: dict, name: str) -> list:
    return [None if math.isnan(v) else pytest.approx(v, rel=1e-6) for v in series[name]]


def test_each_term_and_each_lr_is_its_own_step_column_live_and_replayed(tmp_path):
    events = composite_run(n_epochs=2, steps_per_epoch=6, log_every=4)
    run_dir = tmp_path / R1
    run_dir.mkdir()
    write_jsonl(run_dir / "metrics.jsonl", events)
    live = TrainingMonitor()
    feed(live, events)
    replay = TrainingMonitor.from_run(R1, runs_root=tmp_path)
    try:
        s = live.series()
        steps = s["step"]
        assert steps == list(range(1, 13))
        assert _column(s, "term.recon") == [pytest.approx(_recon(k), rel=1e-6) for k in steps]
        assert _column(s, "term.kl") == [
            None if _kl(k) is None else pytest.approx(_kl(k), rel=1e-6) for k in steps
        ]
        assert s["aux.load_balance"] == [0.5] * 12
        assert _column(s, "lr.D") == [pytest.approx(lr / 4, rel=1e-6) for lr in s["lr"]]
        assert _column(s, "lr.G") == _column(s, "lr")
        assert "lr.G:min" not in s  # a learning rate is the last one of a bucket, no band
        assert "term.recon:min" in s  # a term has its band, like the loss
        rows = live.epoch_rows
        assert [r["train"]["recon"] for r in rows] == [1.5, 3.0]
        assert [r["train"]["kl"] for r in rows] == [0.25, 0.25]
        assert _plain(replay.series()) == _plain(s)
        assert replay.epoch_rows == rows
        # what a view receives: the same columns in its snapshot
        fe = FakeFrontend(replay)
        fe.hello()
        sent = [FakeFrontend.decode(c, b) for c, b in fe.custom_with_buffers() if "ops" in c]
        cols = next(d["steps"] for d in sent if "steps" in d)
        for name in ("term.recon", "term.kl", "aux.load_balance", "lr.G", "lr.D"):
            assert name in cols, name
        assert cols["term.recon"][0] == pytest.approx(2.0)
    finally:
        live.close()
        replay.close()


def test_a_plain_run_has_no_term_columns_and_its_log_lines_are_unchanged(tmp_path):
    events = scripted_run(run_id=R1, n_epochs=1, steps_per_epoch=3)
    write_jsonl(tmp_path / "metrics.jsonl", events)
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [x for x in lines if x["event"] == "step"]
    assert steps
    assert all("terms" not in x and "lrs" not in x for x in steps)
    m = TrainingMonitor()
    feed(m, events)
    assert not [k for k in m.series() if k.startswith(("term.", "aux.", "lr."))]
    m.close()


def test_the_log_writes_terms_and_lrs_only_when_set(tmp_path):
    write_jsonl(tmp_path / "metrics.jsonl", composite_run(n_epochs=1, steps_per_epoch=5))
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    step5 = next(x for x in lines if x["event"] == "step" and x["step"] == 5)
    assert step5["terms"] == {"recon": 0.4, "kl": None}
    assert step5["lrs"] == {"G": 0.01, "D": 0.0025}


def test_a_term_named_like_a_field_never_hides_the_total():
    m = TrainingMonitor()
    feed(m, composite_run(n_epochs=1, steps_per_epoch=4, loss_term=True))
    row = m.epoch_rows[0]
    assert row["train"]["loss"] == pytest.approx(1.0 / 4)  # the total, as scripted
    assert row["train"]["term.loss"] == 99.0
    m.close()


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("terms", {"recon": "big"}, "terms"),
        ("terms", [1.0, 2.0], "terms"),
        ("lrs", {"G": None}, "lrs"),
        ("lrs", {"G": float("inf")}, "lrs"),
    ],
)
def test_a_damaged_term_or_lr_in_a_line_is_one_error_naming_the_field(field, value, says):
    line = {
        "event": "step",
        "step": 1,
        "epoch": 1,
        "batch": 0,
        "lr": 0.01,
        "samples": 8,
        "loss": 0.5,
        field: value,
    }
    with pytest.raises(LogDamagedError, match=says):
        event_from_json(line, "metrics.jsonl", line=3)


def test_terms_survive_decimation_as_means_and_lrs_as_the_last_value():
    m = TrainingMonitor(max_points=1000)
    feed(m, composite_run(n_epochs=1, steps_per_epoch=3000, log_every=500))
    s = m.series()
    assert len(s["step"]) <= 1000
    assert m.steps_seen == 3000
    first, last = s["first"][-1], s["step"][-1]
    want = [_recon(k) for k in range(first, last + 1)]
    assert s["term.recon"][-1] == pytest.approx(sum(want) / len(want), rel=1e-5)
    assert s["term.recon:max"][-1] == pytest.approx(max(want), rel=1e-5)
    assert s["lr.D"][-1] == pytest.approx(0.01 / 4, rel=1e-6)
    m.close()


def test_a_new_run_in_the_same_monitor_drops_the_last_runs_terms():
    m = TrainingMonitor()
    fe = FakeFrontend(m)
    fe.hello()
    feed(m, composite_run(n_epochs=1, steps_per_epoch=4))
    assert "term.recon" in m.series()
    fe.clear()
    feed(m, scripted_run(run_id="8" * 32, n_epochs=1, steps_per_epoch=4))
    assert not [k for k in m.series() if k.startswith(("term.", "aux.", "lr."))]
    sent = [FakeFrontend.decode(c, b) for c, b in fe.custom_with_buffers() if "ops" in c]
    last_steps = [d["steps"] for d in sent if "steps" in d][-1]
    assert "term.recon" not in last_steps
    assert list(last_steps["loss"]) == pytest.approx([1.0, 0.5, 1 / 3, 0.25])
    m.close()
