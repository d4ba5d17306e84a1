"""W&B (§2.8): what WandbCallback logs, read back from the offline run's own ``.wandb``
file (``wandb_reader``: wandb's protobuf records, as wandb-core writes them); the
refusals before any run directory; distributed.writer_only."""

from __future__ import annotations

import sys

import engine_factories as f
import pytest
import torch
import trainer_factories as tf
from wandb_reader import offline_runs, read_run

from nnx_lab import (
    ConfigError,
    LossTerm,
    MetricSpec,
    Objective,
    ObjectiveResult,
    Trainer,
    WandbCallback,
)
from nnx_lab.distributed import writer_only


class _TwoTerms(Objective):
    scores_outputs = True

    def compute(self, net, batch, ctx):
        X, y = batch
        out = net(X)
        ce = torch.nn.functional.cross_entropy(out, y, reduction="sum")
        return ObjectiveResult(
            [
                LossTerm("ce", ce, y.shape[0]),
                LossTerm("l2", (out**2).sum(), out.numel(), weight=0.1),
            ],
            outputs=out,
        )


def _series(run, key):
    return [(row["_step"], row[key]) for row in run.history if key in row]


def test_scalars_terms_config_and_summary_read_back(runs_root, tmp_path):
    params = f.train_params(runs_root, n_epochs=2, log_every=1, metrics=[MetricSpec("nll")])
    cb = WandbCallback(project="nnx-tests", dir=tmp_path, config={"note": "unit"})
    run = f.model().train(params, callbacks=[cb], objective=_TwoTerms())
    (folder,) = offline_runs(tmp_path)
    wb = read_run(folder)
    assert (wb.name, wb.project, wb.exit_code) == (run.id, "nnx-tests", 0)
    # the configuration of run.yaml, with the run id and the caller's values
    assert wb.config["nnx_run_id"] == run.id
    assert wb.config["note"] == "unit"
    assert wb.config["train"]["optim"]["max_lr"] == pytest.approx(0.01)
    assert wb.config["train"]["n_epochs"] == 2
    assert wb.config["net"]["activation"] == "relu"
    # per step: the loss at the global step, each LossTerm, the lr
    assert [s for s, _ in _series(wb, "step/loss")] == list(range(1, 17))
    assert [v for _, v in _series(wb, "step/loss")] == pytest.approx(
        [i.train_edp.loss for i in run.idps]
    )
    ce, l2 = _series(wb, "step/terms/ce"), _series(wb, "step/terms/l2")
    assert len(ce) == len(l2) == 16
    total = [v for _, v in _series(wb, "step/loss")]
    assert total == pytest.approx([a + 0.1 * b for (_, a), (_, b) in zip(ce, l2, strict=True)])
    assert [v for _, v in _series(wb, "step/lr")] == pytest.approx([0.01] * 16)
    # per epoch: on the epoch axis, validation (declared metrics too) and training
    epochs = [row for row in wb.history if "epoch/val/loss" in row]
    assert [row["epoch"] for row in epochs] == [1, 2]
    assert [row["epoch/val/loss"] for row in epochs] == pytest.approx(
        [e["val"]["loss"] for e in run.epochs]
    )
    assert all("epoch/val/metrics/nll" in row and "epoch/lr" in row for row in epochs)
    assert all("epoch/train/terms/ce" in row for row in epochs)
    # the summary: the final epoch's metrics and the status
    assert wb.summary["status"] == "finished"
    assert wb.summary["epoch/val/loss"] == pytest.approx(run.epochs[-1]["val"]["loss"])
    assert "epoch/val/metrics/nll" in wb.summary


def test_a_trainers_rates_are_logged_per_optimizer(runs_root, tmp_path):
    cb = WandbCallback(project="nnx-tests", name="gan", dir=tmp_path)
    Trainer(tf.gan_model()).train(
        tf.trainer_params(runs_root), trainer_step_fn=tf.gan_step, callbacks=[cb]
    )
    wb = read_run(offline_runs(tmp_path)[0])
    assert wb.name == "gan"
    assert [v for _, v in _series(wb, "step/lrs/G")] == pytest.approx([1e-3] * 8)
    assert [v for _, v in _series(wb, "step/lrs/D")] == pytest.approx([2e-3] * 8)
    assert [s for s, _ in _series(wb, "step/lrs/D")] == [2, 4, 6, 8, 10, 12, 14, 16]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"project": ""}, "project"),
        ({"project": None}, "project"),
        ({"project": "p", "mode": "cloud"}, "mode"),
        ({"project": "p", "name": 3}, "name"),
        ({"project": "p", "config": [1]}, "config"),
        ({"project": "p", "dir": "/no/such/folder"}, "dir"),
    ],
)
def test_bad_settings_are_refused_when_the_callback_is_made(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        WandbCallback(**kwargs)


def test_without_wandb_the_error_says_how_to_install_it_before_any_run_dir(monkeypatch, runs_root):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ImportError, match=r'pip install "nnx-lab\[wandb\]"'):
        f.model().train(
            f.train_params(runs_root, n_epochs=1), callbacks=[WandbCallback(project="p")]
        )
    assert not runs_root.exists()


def test_disabled_mode_writes_nothing(runs_root, tmp_path):
    f.model().train(
        f.train_params(runs_root, n_epochs=1),
        callbacks=[WandbCallback(project="p", mode="disabled", dir=tmp_path)],
    )
    assert offline_runs(tmp_path) == []


def test_writer_only_logs_on_rank_zero_and_nothing_elsewhere(runs_root, tmp_path, monkeypatch):
    import nnx_lab.distributed._writer_only as w

    (tmp_path / "rank0").mkdir()
    (tmp_path / "rank1").mkdir()
    run = f.model().train(
        f.train_params(runs_root, n_epochs=1),
        callbacks=[writer_only(WandbCallback(project="p", dir=tmp_path / "rank0"))],
    )
    assert read_run(offline_runs(tmp_path / "rank0")[0]).config["nnx_run_id"] == run.id
    monkeypatch.setattr(w, "rank", lambda: 1)
    f.model().train(
        f.train_params(runs_root, n_epochs=1, seed=3),
        callbacks=[writer_only(WandbCallback(project="p", dir=tmp_path / "rank1"))],
    )
    assert offline_runs(tmp_path / "rank1") == []


def test_a_finished_runs_log_converts_to_the_same_w_and_b_run(runs_root, tmp_path):
    from nnx_lab.export import to_wandb

    (tmp_path / "live").mkdir()
    (tmp_path / "converted").mkdir()
    params = f.train_params(runs_root, n_epochs=2, log_every=1)
    run = f.model().train(params, callbacks=[WandbCallback(project="p", dir=tmp_path / "live")])
    folder = to_wandb(run.id, "p", dir=tmp_path / "converted", runs_root=runs_root)
    assert folder == offline_runs(tmp_path / "converted")[0]
    live, converted = read_run(offline_runs(tmp_path / "live")[0]), read_run(folder)
    assert converted.name == run.id
    assert converted.summary["status"] == "finished"
    keys = {k for row in live.history for k in row if not k.startswith("_")}
    assert "step/loss" in keys
    assert "epoch/val/loss" in keys
    for key in keys:
        assert _series(converted, key) == _series(live, key), key
    assert {k: v for k, v in converted.config.items() if k != "_wandb"} == {
        k: v for k, v in live.config.items() if k != "_wandb"
    }
    with pytest.raises(ConfigError, match="no log"):
        to_wandb("0" * 32, "p", dir=tmp_path, runs_root=runs_root)
