"""TensorBoard (§2.8): what TensorBoardCallback writes, read back with tensorboard's own
EventAccumulator; nnx_lab.export.to_tensorboard; distributed.writer_only."""

from __future__ import annotations

import json
import sys

import engine_factories as f
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from nnx_lab import (
    ConfigError,
    LossTerm,
    MetricSpec,
    Objective,
    ObjectiveResult,
    TensorBoardCallback,
)
from nnx_lab.distributed import writer_only
from nnx_lab.export import to_tensorboard


def _read(folder):
    ea = EventAccumulator(str(folder), size_guidance={"scalars": 0, "histograms": 0})
    ea.Reload()
    return ea


def _scalars(ea, tag):
    return [(s.step, s.value) for s in ea.Scalars(tag)]


def _hparams(ea):
    out = {}
    for content in ea.PluginTagToContent("hparams").values():
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
        out[data.WhichOneof("data")] = getattr(data, data.WhichOneof("data"))
    return out


def _value(v):
    return {"number_value": v.number_value, "string_value": v.string_value}[v.WhichOneof("kind")]


def test_scalars_hparams_and_histograms_read_back_as_one_run(runs_root, tmp_path):
    logs = tmp_path / "tb"
    params = f.train_params(runs_root, n_epochs=2, log_every=1, metrics=[MetricSpec("nll")])
    run = f.model().train(params, callbacks=[TensorBoardCallback(logs, histograms_every=1)])
    assert [p.name for p in logs.iterdir()] == [run.id]  # one run: no hparams sub-run
    assert [p.suffix for p in (logs / run.id).iterdir() if p.is_dir()] == []
    ea = _read(logs / run.id)
    # per epoch: training summary, validation metrics (declared ones too), the lr
    assert _scalars(ea, "epoch/val/loss") == [
        (e["epoch"], pytest.approx(e["val"]["loss"])) for e in run.epochs
    ]
    assert [s for s, _ in _scalars(ea, "epoch/val/metrics/nll")] == [1, 2]
    assert [s for s, _ in _scalars(ea, "epoch/train/loss")] == [1, 2]
    assert _scalars(ea, "epoch/lr") == [(1, pytest.approx(0.01)), (2, pytest.approx(0.01))]
    # per step: every optimizer step's loss and lr at its global step
    steps = _scalars(ea, "step/loss")
    assert [s for s, _ in steps] == list(range(1, 17))
    assert [v for _, v in steps] == pytest.approx([i.train_edp.loss for i in run.idps])
    assert len(_scalars(ea, "step/lr")) == 16
    # hparams: the configuration, the status and the final epoch's metrics
    hp = _hparams(ea)
    assert set(hp) == {"experiment", "session_start_info", "session_end_info"}
    start = {k: _value(v) for k, v in hp["session_start_info"].hparams.items()}
    assert start["train.optim.max_lr"] == pytest.approx(0.01)
    assert start["train.n_epochs"] == 2
    assert start["net.activation"] == "relu"
    assert start["status"] == "finished"
    metrics = {m.name.tag for m in hp["experiment"].metric_infos}
    assert {"epoch/val/loss", "epoch/val/metrics/nll", "epoch/train/loss"} <= metrics
    # histograms of weights and gradients, every epoch
    tags = ea.Tags()["histograms"]
    assert "weights/layers.0.weight" in tags
    assert "grads/layers.0.weight" in tags
    assert [h.step for h in ea.Histograms("weights/layers.0.weight")] == [1, 2]


class _TwoTerms(Objective):
    def compute(self, net, batch, ctx):
        X, y = batch
        out = net(X)
        ce = torch.nn.functional.cross_entropy(out, y, reduction="sum")
        return ObjectiveResult(
            [
                LossTerm("ce", ce, y.shape[0]),
                LossTerm("l2", (out**2).sum(), out.numel(), weight=0.1),
            ]
        )


def test_an_objectives_loss_terms_are_scalars_of_their_own(runs_root, tmp_path):
    logs = tmp_path / "tb"
    params = f.train_params(runs_root, n_epochs=2, log_every=1)
    run = f.model().train(params, callbacks=[TensorBoardCallback(logs)], objective=_TwoTerms())
    ea = _read(logs / run.id)
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [x for x in lines if x["event"] == "step"]
    for name in ("ce", "l2"):
        assert _scalars(ea, f"step/terms/{name}") == [
            (x["step"], pytest.approx(x["terms"][name])) for x in steps
        ]
        assert [s for s, _ in _scalars(ea, f"epoch/train/terms/{name}")] == [1, 2]
    # the step's loss is the weighted sum of its terms
    ce, l2 = _scalars(ea, "step/terms/ce"), _scalars(ea, "step/terms/l2")
    total = [v for _, v in _scalars(ea, "step/loss")]
    assert total == pytest.approx([a + 0.1 * b for (_, a), (_, b) in zip(ce, l2, strict=True)])


def test_histograms_only_every_n_epochs_and_none_by_default(runs_root, tmp_path):
    f.model().train(
        f.train_params(runs_root, n_epochs=3),
        callbacks=[TensorBoardCallback(tmp_path / "a", histograms_every=2)],
    )
    run = f.model().train(
        f.train_params(runs_root, n_epochs=3, seed=1),
        callbacks=[TensorBoardCallback(tmp_path / "b")],
    )
    a = _read(next((tmp_path / "a").iterdir()))
    assert [h.step for h in a.Histograms("weights/layers.0.weight")] == [2]
    assert _read(tmp_path / "b" / run.id).Tags()["histograms"] == []


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"log_dir": ""}, "log_dir"),
        ({"histograms_every": 0}, "histograms_every"),
        ({"histograms_every": True}, "histograms_every"),
    ],
)
def test_bad_settings_are_refused_when_the_callback_is_made(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        TensorBoardCallback(**kwargs)


def test_without_tensorboard_the_error_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(ImportError, match=r"nnx-lab\[tensorboard\]"):
        TensorBoardCallback("tb")


def test_a_finished_runs_log_converts_to_the_same_scalars(runs_root, tmp_path):
    live = tmp_path / "live"
    params = f.train_params(runs_root, n_epochs=2, log_every=1)
    run = f.model().train(params, callbacks=[TensorBoardCallback(live)])
    folder = to_tensorboard(run.id, tmp_path / "converted", runs_root=runs_root)
    assert folder == tmp_path / "converted" / run.id
    a, b = _read(live / run.id), _read(folder)
    assert a.Tags()["scalars"]
    assert sorted(a.Tags()["scalars"]) == sorted(b.Tags()["scalars"])
    for tag in a.Tags()["scalars"]:
        assert _scalars(a, tag) == _scalars(b, tag), tag
    assert {k: _value(v) for k, v in _hparams(b)["session_start_info"].hparams.items()} == {
        k: _value(v) for k, v in _hparams(a)["session_start_info"].hparams.items()
    }
    with pytest.raises(ConfigError, match="already holds TensorBoard events"):
        to_tensorboard(run.id, tmp_path / "converted", runs_root=runs_root)
    with pytest.raises(ConfigError, match="no log"):
        to_tensorboard("0" * 32, tmp_path / "x", runs_root=runs_root)
    assert not (tmp_path / "x").exists()


def test_writer_only_writes_on_rank_zero_and_nothing_elsewhere(runs_root, tmp_path, monkeypatch):
    import nnx_lab.distributed._writer_only as w

    run = f.model().train(
        f.train_params(runs_root, n_epochs=1),
        callbacks=[writer_only(TensorBoardCallback(tmp_path / "rank0", histograms_every=1))],
    )
    ea = _read(tmp_path / "rank0" / run.id)
    assert "epoch/val/loss" in ea.Tags()["scalars"]
    assert "weights/layers.0.weight" in ea.Tags()["histograms"]  # NNx's hook forwarded too
    monkeypatch.setattr(w, "rank", lambda: 1)
    f.model().train(
        f.train_params(runs_root, n_epochs=1, seed=3),
        callbacks=[writer_only(TensorBoardCallback(tmp_path / "rank1", histograms_every=1))],
    )
    assert not (tmp_path / "rank1").exists()


_DDP_SCRIPT = """
import sys
import torch
from torch.utils.data import TensorDataset
from nnx_lab import Losses, Nets, NNModel, NNModelParams, NNOptimParams, NNParams, NNTrainParams
from nnx_lab import TensorBoardCallback, distributed

torch.set_num_threads(1)
distributed.init_process_group()
g = torch.Generator().manual_seed(0)
data = TensorDataset(torch.randn(64, 4, generator=g), torch.randint(0, 3, (64,), generator=g))
model = NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=[8]),
                params=NNModelParams(net=Nets.FEED_FWD, loss=Losses.CROSS_ENTROPY))
params = NNTrainParams(
    n_epochs=2, seed=0, optim=NNOptimParams(max_lr=0.01), runs_root=sys.argv[1],
    train_loader=distributed.train_loader(data, batch_size=8, policy="pad", seed=0),
    val_loader=distributed.validation_loader(data, batch_size=16),
)
plain = sys.argv[3] == "plain"
tb = TensorBoardCallback(sys.argv[2], histograms_every=1)
model.train(params, callbacks=[tb if plain else distributed.writer_only(tb)],
            distributed=distributed.DDP())
distributed.shutdown()
"""


def test_writer_only_under_two_real_ranks_writes_one_copy(tmp_path):
    import os
    import subprocess
    from pathlib import Path

    import nnx_lab

    script = tmp_path / "ddp_tb.py"
    script.write_text(_DDP_SCRIPT)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": str(Path(nnx_lab.__file__).resolve().parents[1]),
    }
    counts = {}
    for mode in ("wrapped", "plain"):
        logs = tmp_path / f"tb-{mode}"
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            str(script),
            str(tmp_path / f"runs-{mode}"),
            str(logs),
            mode,
        ]
        done = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=240, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        (folder,) = logs.iterdir()  # one run id on every rank
        counts[mode] = len(list(folder.glob("events.out.tfevents.*")))
        epochs = [s for s, _ in _scalars(_read(folder), "epoch/val/loss")]
        assert epochs == ([1, 2] if mode == "wrapped" else [1, 2, 1, 2])
    assert counts == {"wrapped": 1, "plain": 2}  # unwrapped, every rank writes its copy
