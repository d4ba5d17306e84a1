"""The engine's seams: a loop with no run directory, evaluate() as a free function, the
typed training state and its RNG capture, NNx's callback protocol, custom losses and
``ignore_index``, and NNx's documented unpacking of ``predict``."""

from __future__ import annotations

import math
import random
import warnings

import engine_factories as f
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

from nnx_lab import (
    Checkpoints,
    ConfigError,
    DataError,
    EarlyStopping,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNRun,
    TrainingControl,
    TrainingState,
)
from nnx_lab.engine._codec import join_state, split_state
from nnx_lab.engine.evaluate import evaluate
from nnx_lab.engine.events import EpochEnded
from nnx_lab.engine.loop import TrainingLoop
from nnx_lab.engine.optim import build_optimizer, trainable_groups
from nnx_lab.engine.sinks import EventBus
from nnx_lab.engine.train_step import TrainStep
from nnx_lab.engine.training_state import GENERATION, RngState, preserved_rng
from nnx_lab.engine.update import Updater
from nnx_lab.errors import TrainingStateError


class Recorder:
    """A sink that keeps every event it sees."""

    def __init__(self) -> None:
        self.events = []

    def _keep(self, event):
        self.events.append(event)

    on_run_started = on_step_metrics = on_epoch_ended = on_run_ending = on_run_finished = _keep

    def kinds(self):
        return [e.kind for e in self.events]


def _bare_loop(model, params, sinks=()):
    """A TrainingLoop with no handler that records a run: what a sweep or a probe uses."""
    optimizer = build_optimizer(trainable_groups(model.net), params.optim)
    updater = Updater(optimizer, None, model.precision, params.optim.grad_clip_norm)
    step = TrainStep(model.net, model.loss_fn, model.task(), model.device, model.precision, updater)
    return TrainingLoop(
        step, params, scheduler=None, bus=EventBus(sinks), control=TrainingControl()
    )


# -- a loop with no run directory ---------------------------------------------------------
def test_the_loop_trains_and_reports_with_no_run_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = f.model()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    rec = Recorder()
    params = f.train_params(tmp_path / "never", n_epochs=2)
    outcome = _bare_loop(model, params, [rec]).run()
    assert outcome.status.value == "finished"
    assert list(tmp_path.iterdir()) == []  # no runs/, no log, no checkpoint
    kinds = rec.kinds()
    assert kinds[0] == "run_started"
    assert kinds[-2:] == ["run_ending", "run_finished"]
    assert kinds.count("epoch_ended") == 2
    assert rec.events[0].run_id is None
    assert rec.events[0].run_dir is None
    steps = [r for e in rec.events if e.kind == "step_metrics" for r in e.records]
    assert [r.step for r in steps] == list(range(1, 17))  # 2 epochs x 8 batches
    assert any(not torch.equal(before[k], v) for k, v in model.net.state_dict().items())


def test_evaluate_is_one_function_for_the_model_and_the_loop(runs_root):
    train, val = f.loaders()
    model = f.model(net={"dropout_prob": 0.0})
    run = model.train(f.train_params(runs_root, n_epochs=1, train_loader=train, val_loader=val))
    direct = evaluate(model.net, val, model.loss_fn, model.task(), device=model.device)
    assert direct == model.evaluate(val)
    assert direct.to_json() == run.epochs[-1]["val"]  # the loop's validation pass
    X, y = val.dataset.tensors
    assert direct.loss == pytest.approx(float(F.cross_entropy(model.predict(X).logits, y)))


def test_evaluate_restores_each_modules_own_mode():
    model = f.model()
    model.net.train()
    model.net.layers[2].eval()  # a deliberate mix: one module frozen in eval
    modes = [m.training for m in model.net.modules()]
    _, val = f.loaders()
    model.evaluate(val)
    model.predict(torch.randn(4, 8))
    assert [m.training for m in model.net.modules()] == modes


# -- the typed training state -------------------------------------------------------------
def test_a_training_state_round_trips_through_the_sidecar_form(runs_root):
    model = f.model()
    run = model.train(f.train_params(runs_root, n_epochs=2), callbacks=[EarlyStopping(3)])
    state = NNCheckpoint.load_training_state(run=run.id, runs_root=runs_root)
    assert isinstance(state, TrainingState)
    assert state["generation"] == GENERATION
    assert (state.epoch, state.step, state["epoch"]) == (2, 16, 2)
    assert state.callbacks["0:EarlyStopping"]["selected"] == "val_edp.error"
    tensors: dict = {}
    tree = join_state(split_state(state.to_tree(), "state", tensors), tensors)
    again = TrainingState.from_tree(tree, source="memory")
    assert torch.equal(again.rng.torch_cpu, state.rng.torch_cpu)
    assert again.optimizer_topology == state.optimizer_topology
    assert again.to_tree().keys() == state.to_tree().keys()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.update(generation=GENERATION + 1), "generation mismatch"),
        (lambda t: t.pop("planned_epochs"), "lacks planned_epochs"),
        (lambda t: t.update(rng={"numpy": None}), "no torch CPU stream"),
        (lambda t: t.update(epoch_complete=False), "no epoch-start RNG state"),
    ],
)
def test_a_damaged_training_state_is_refused_by_name(runs_root, change, message):
    run = f.model().train(f.train_params(runs_root, n_epochs=1))
    tree = NNCheckpoint.load(run.id, runs_root=runs_root).training_state_tree()
    change(tree)
    with pytest.raises(TrainingStateError, match=message):
        TrainingState.from_tree(tree, source="last.json")


def test_preserved_rng_restores_every_stream_and_the_loaders_generators():
    data = TensorDataset(torch.arange(64.0).reshape(32, 2), torch.zeros(32, dtype=torch.long))
    own = DataLoader(data, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(1))
    sampler = RandomSampler(data, generator=torch.Generator().manual_seed(2))
    by_sampler = DataLoader(data, batch_size=4, sampler=sampler)
    loaders = [own, by_sampler]

    def draw():
        return (
            random.random(),
            float(np.random.rand()),
            float(torch.rand(())),
            [b[0].tolist() for b in own],
            [b[0].tolist() for b in by_sampler],
        )

    with preserved_rng(loaders):
        first = draw()
    assert draw() == first  # everything was put back, so the same draws repeat
    saved = RngState.capture(loaders)
    a = draw()
    saved.restore(loaders)
    assert draw() == a


def test_the_first_batch_peek_leaves_the_loaders_generators_untouched(runs_root):
    X, y, Xv, yv = f.data()
    g = torch.Generator().manual_seed(11)
    sampler_gen = torch.Generator().manual_seed(12)
    own = DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True, generator=g)
    by_sampler = DataLoader(
        TensorDataset(Xv, yv),
        batch_size=8,
        sampler=RandomSampler(TensorDataset(Xv, yv), generator=sampler_gen),
    )
    bad_val = DataLoader(TensorDataset(torch.randn(8, 5), torch.zeros(8).long()), batch_size=4)
    before = (g.get_state(), sampler_gen.get_state(), torch.get_rng_state())
    for train in (own, by_sampler):  # peeked and accepted; then the val loader is refused
        with pytest.raises(DataError, match="val_loader"):
            f.model().train(f.train_params(runs_root, train_loader=train, val_loader=bad_val))
    after = (g.get_state(), sampler_gen.get_state(), torch.get_rng_state())
    for a, b in zip(before, after, strict=True):
        assert torch.equal(a, b)
    assert not runs_root.exists()


# -- NNx's callback protocol ----------------------------------------------------------------
class NNxStyle:
    """A callback written for NNx: ctx hooks, and ctx.should_stop."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.stop_at = stop_at
        self.calls = []

    def on_train_begin(self, ctx):
        self.calls.append(("begin", ctx.epoch, len(ctx.idps)))

    def on_epoch_begin(self, ctx):
        self.calls.append(("epoch_begin", ctx.epoch, ctx.step))

    def on_epoch_end(self, ctx):
        self.calls.append(("epoch_end", ctx.epoch, len(ctx.idps), ctx.val_edp.samples))
        if ctx.epoch == self.stop_at:
            ctx.should_stop = True

    def on_train_end(self, ctx):
        self.calls.append(("end", ctx.status, ctx.run.id == ctx.model.last_run.id))


def test_nnx_style_callbacks_are_called_and_can_stop_the_run(runs_root):
    cb = NNxStyle(stop_at=2)
    run = f.model().train(f.train_params(runs_root, n_epochs=5), callbacks=[cb])
    assert cb.calls == [
        ("begin", 0, 0),
        ("epoch_begin", 1, 0),
        ("epoch_end", 1, 8, 64),
        ("epoch_begin", 2, 8),
        ("epoch_end", 2, 16, 64),
        ("end", "finished", True),
    ]
    assert run.status.value == "finished"
    assert len(run.epochs) == 2
    assert "should_stop" in run.metadata["stop_reason"]


def test_nnx_legacy_callables_get_the_history_after_each_epoch(runs_root):
    seen = []
    f.model().train(
        f.train_params(runs_root, n_epochs=3), callbacks=[lambda idps: seen.append(len(idps))]
    )
    assert seen == [8, 16, 24]


def test_an_object_with_no_known_hook_is_refused_before_a_run(runs_root):
    class Typo:
        def on_epoch_done(self, ctx):  # no such hook anywhere
            pass

    with pytest.raises(TypeError, match="implements no known hook"):
        f.model().train(f.train_params(runs_root), callbacks=[Typo()])
    assert not runs_root.exists()


def test_early_stopping_follows_the_loss_when_the_validation_error_is_nan():
    """§2.11's first-finite order: a NaN error next to a finite, falling loss is followed
    through the loss, and never stops the run at its first epoch."""
    es = EarlyStopping(patience=1)
    control = TrainingControl()
    es.on_attach(control)

    def epoch(n, loss):
        val = {"error": math.nan, "loss": loss}
        return EpochEnded(
            epoch=n,
            step=n * 10,
            lr=0.01,
            train={},
            val=val,
            signal=None,
            signal_source=None,
            improved=False,
            seconds=0.1,
        )

    for n, loss in enumerate([1.0, 0.8, 0.7, 0.6], start=1):
        es.on_epoch_ended(epoch(n, loss))
    assert not control.stop_requested
    assert es.selected == "val_edp.loss"
    assert es.best == 0.6
    es.on_epoch_ended(epoch(5, 0.9))  # worse, with patience 1
    assert control.stop_requested
    assert es.stopped_epoch == 5


# -- custom losses and ignore_index ------------------------------------------------------
class SpyLoss(torch.nn.Module):
    """A custom loss module: keeps what it receives, returns cross-entropy."""

    def __init__(self, weight=None) -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.inputs = []

    def forward(self, out, y):
        self.inputs.append(out.detach())
        return F.cross_entropy(out, y, weight=self.weight)


def test_a_custom_loss_module_receives_the_raw_logits_and_enters_the_run_id(runs_root):
    spy = SpyLoss()
    model = NNModel(net_params=f.net_params(dropout_prob=0.0), params=NNModelParams(loss=spy))
    train, val = f.loaders()
    run = model.train(f.train_params(runs_root, n_epochs=1, train_loader=train, val_loader=val))
    assert run.status.value == "finished"
    first = spy.inputs[0]
    assert first.shape == (32, 3)
    assert not torch.allclose(first.softmax(-1).sum(-1), first.sum(-1))  # raw, not softmaxed
    assert run.epochs[-1]["val"]["accuracy"] is not None  # integer targets: classification
    assert run.config["model"]["loss"]["custom"].endswith("SpyLoss")
    weighted = NNModel(
        net_params=f.net_params(dropout_prob=0.0),
        params=NNModelParams(loss=SpyLoss(torch.tensor([1.0, 2.0, 1.0]))),
    )
    other = weighted.train(f.train_params(runs_root, n_epochs=1, train_loader=train))
    assert other.id != run.id  # class weights change the loss, so the id
    with pytest.raises(ConfigError, match="custom loss"):
        NNModel.from_checkpoint(NNCheckpoint.load(run.id, runs_root=runs_root))
    again = NNModel.from_checkpoint(NNCheckpoint.load(run.id, runs_root=runs_root), loss=spy)
    assert torch.equal(again.predict(val).logits, model.predict(val).logits)


def test_model_loss_fn_can_be_replaced_by_a_callable(runs_root):
    def mse(out, y):
        return F.mse_loss(out.squeeze(-1), y)

    X = torch.randn(64, 8)
    y = X[:, 0] * 2.0
    model = f.model(net={"output_dim": 1, "dropout_prob": 0.0})
    model.loss_fn = mse
    loader = DataLoader(TensorDataset(X, y), batch_size=16)
    run = model.train(f.train_params(runs_root, n_epochs=2, train_loader=loader, val_loader=loader))
    val = run.epochs[-1]["val"]
    assert val["accuracy"] is None
    assert val["error"] is None
    assert val["loss"] == pytest.approx(float(F.mse_loss(model.predict(X).logits[:, 0], y)))
    assert run.config["model"]["loss"]["custom"].endswith("mse")
    assert model.predict(X).classes.shape == (64,)  # the values, not argmax


def test_ignore_index_targets_count_in_no_loss_and_no_metric(runs_root):
    X, y, _, _ = f.data(n_train=64)
    y = y.clone()
    y[::4] = -100  # a quarter of the targets ignored
    y[:16] = -100  # and one whole batch of 16
    loader = DataLoader(TensorDataset(X, y), batch_size=16)
    model = f.model(net={"dropout_prob": 0.0})
    run = model.train(f.train_params(runs_root, n_epochs=1, train_loader=loader, val_loader=loader))
    first = run.idps[0].train_edp
    assert first.loss is None
    assert first.accuracy is None
    assert all(math.isfinite(p.train_edp.loss) for p in run.idps[1:])
    assert all(torch.isfinite(p).all() for p in model.net.parameters())
    logits = model.predict(X).logits
    keep = y != -100
    val = run.epochs[-1]["val"]
    assert val["loss"] == pytest.approx(float(F.cross_entropy(logits, y)), rel=1e-5)
    accuracy = float((logits[keep].argmax(1) == y[keep]).float().mean())
    assert val["accuracy"] == pytest.approx(accuracy)


def test_a_label_out_of_range_is_still_refused_next_to_ignored_ones(runs_root):
    X = torch.randn(16, 8)
    y = torch.tensor([-100, 5] + [0] * 14)
    with pytest.raises(DataError, match=r"span \[0, 5\].*ignore_index=-100"):
        f.model().train(f.train_params(runs_root, train_loader=[(X, y)], val_loader=None))
    assert not runs_root.exists()


# -- predict() as NNx documents it ---------------------------------------------------------
def test_predict_unpacks_into_logits_and_classes():
    model = f.model()
    X = torch.randn(10, 8)
    result = model.predict(X=X)
    logits, classes = model.predict(X=X)
    assert torch.equal(logits, result.logits)
    assert torch.equal(classes, result.classes)
    assert len(result) == 10


# -- BEST after a resume ------------------------------------------------------------------
def test_best_survives_a_resume_whose_first_epoch_is_worse(tmp_path):
    import test_resume as r

    full_model = r._model()
    full = full_model.train(r._params(tmp_path / "full", 4, seed=6))
    signals = [e["signal"] for e in full.epochs]
    # The fixture's premise: epoch 4 is worse than the best of epochs 1-3.
    assert full.epochs[3]["improved"] is False
    assert signals[3] > min(signals[:3])
    first = r._model().train(r._params(tmp_path, 3, seed=6))
    resumed = r._model().train(r._params(tmp_path, 1, seed=6, resume_from_run_id=first.id))
    assert [e["improved"] for e in resumed.epochs] == [e["improved"] for e in full.epochs]
    best_full = NNCheckpoint.load(full.id, Checkpoints.BEST, runs_root=tmp_path / "full")
    best_split = NNCheckpoint.load(resumed.id, Checkpoints.BEST, runs_root=tmp_path)
    assert best_split.epoch == best_full.epoch == 3
    assert best_split.run_id == resumed.id
    for name, tensor in best_full.model_state.items():
        assert torch.equal(tensor, best_split.model_state[name]), name
    assert "best checkpoint" in resumed.resume_status["restored"]
    assert NNRun.load(resumed.id, runs_root=tmp_path).epochs[-1]["improved"] is False


def test_resume_warns_when_the_loader_has_workers(tmp_path):
    import test_resume as r

    first = r._model().train(r._params(tmp_path, 1))
    train, _val = r._loaders()
    workers = DataLoader(train.dataset, batch_size=16, shuffle=True, num_workers=2)
    with pytest.warns(RuntimeWarning, match="num_workers=2"):
        r._model().train(r._params(tmp_path, 1, train_loader=workers, resume_from_run_id=first.id))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no workers: no warning
        r._model().train(r._params(tmp_path / "b", 1))
