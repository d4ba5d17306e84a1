"""Warm resume (§2.3): a split run continues bit for bit, and every refusal comes first.

The headline: a run of 4 epochs and a run of 2 epochs resumed for 2 more are bitwise
identical (weights, optimizer state, every logged loss, EarlyStopping's state), with a
shuffling loader, dropout and a plateau scheduler, in fp32 and in bf16. A second case
splits where EarlyStopping's counter is mid-count and checks both runs stop at the same
epoch.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    Checkpoints,
    EarlyStopping,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNRun,
    NNSchedulerParams,
    NNTrainParams,
    PrecisionPolicy,
    ResumeError,
)
from nnx_lab.engine.sinks import Callback
from nnx_lab.errors import ConfigError

# One intra-op thread: fast on a shared 2-core box, and the same kernels every run.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


# -- builders -------------------------------------------------------------------------------
def _data():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(8, 3, generator=g)
    X = torch.randn(96, 8, generator=g)
    y = (X @ w + 0.8 * torch.randn(96, 3, generator=g)).argmax(1)
    Xv = torch.randn(48, 8, generator=g)
    yv = (Xv @ w + 0.8 * torch.randn(48, 3, generator=g)).argmax(1)
    return X, y, Xv, yv


def _loaders(own_generator: bool = False):
    """A shuffling train loader: drawing from the global torch RNG, or from its own."""
    X, y, Xv, yv = _data()
    gen = torch.Generator().manual_seed(11) if own_generator else None
    train = DataLoader(TensorDataset(X, y), batch_size=16, shuffle=True, generator=gen)
    return train, DataLoader(TensorDataset(Xv, yv), batch_size=24)


def _model(precision=None, dropout=0.2):
    return NNModel(
        net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=[16], dropout_prob=dropout),
        params=NNModelParams(precision=None if precision is None else PrecisionPolicy(precision)),
    )


def _params(root, n_epochs, own_generator=False, **kw):
    train, val = _loaders(own_generator)
    base = {
        "n_epochs": n_epochs,
        "seed": 3,
        "train_loader": train,
        "val_loader": val,
        "runs_root": str(root),
        "optim": NNOptimParams(max_lr=3e-2, grad_clip_norm=1.0),
        "scheduler": NNSchedulerParams(factor=0.5, patience=0),
    }
    return NNTrainParams(**{**base, **kw})


class RngProbe(Callback):
    """Draws from Python's and NumPy's global RNG each epoch; its draws are its state."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.draws: list[list[float]] = []

    def on_epoch_ended(self, event) -> None:
        self.draws.append([random.random(), float(np.random.rand())])

    def state_dict(self):
        return {"draws": [list(d) for d in self.draws]}

    def load_state_dict(self, state):
        self.draws = [list(d) for d in state["draws"]]


class Tally:
    """A component (train(components=[...])): state travels with the checkpoint."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.count = 0
        self.history = torch.zeros(0)

    def state_dict(self):
        return {"count": self.count, "history": self.history.clone()}

    def load_state_dict(self, state):
        self.count, self.history = int(state["count"]), state["history"].clone()


class TallyBumper(Callback):
    """Updates a Tally at each epoch end, the way a user's step would update an EMA."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally

    def on_epoch_ended(self, event) -> None:
        self.tally.count += 1
        self.tally.history = torch.cat([self.tally.history, torch.rand(1)])


class CounterLog(Callback):
    """Records EarlyStopping's counter after each epoch (listed after it, so it sees it)."""

    def __init__(self, es: EarlyStopping) -> None:
        self.es, self.counters = es, []

    def on_epoch_ended(self, event) -> None:
        self.counters.append(self.es.counter)


def _kit(patience):
    es, tally = EarlyStopping(patience=patience), Tally()
    return es, tally, [es, RngProbe(), TallyBumper(tally)]


def _steps(run) -> list[dict]:
    lines = (Path(run.run_dir) / "metrics.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines if json.loads(x)["event"] == "step"]


def _epochs(run) -> list[dict]:
    drop = ("seconds", "time")
    return [{k: v for k, v in e.items() if k not in drop} for e in run.epochs]


def _assert_same_tree(a, b, path="state"):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), path
        assert a.dtype == b.dtype, path
        assert torch.equal(a, b), path
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b), path
    elif isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _assert_same_tree(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same_tree(x, y, f"{path}[{i}]")
    else:
        assert a == b or (a != a and b != b), f"{path}: {a!r} != {b!r}"


def _same_training_state(run_a, run_b):
    a = NNCheckpoint.load_training_state(
        run=run_a.id, type=Checkpoints.LAST, runs_root=run_a.run_dir.parent
    )
    b = NNCheckpoint.load_training_state(
        run=run_b.id, type=Checkpoints.LAST, runs_root=run_b.run_dir.parent
    )
    for key in (
        "optimizer",
        "scheduler",
        "scaler",
        "rng",
        "epoch",
        "step",
        "best_value",
        "has_best",
        "planned_epochs",
    ):
        _assert_same_tree(a.to_tree()[key], b.to_tree()[key], key)
    by_type = [{k.partition(":")[2]: v for k, v in s["callbacks"].items()} for s in (a, b)]
    _assert_same_tree(by_type[0], by_type[1], "callbacks")


def _tree_digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# -- the headline ---------------------------------------------------------------------------
@pytest.mark.parametrize(("precision", "own_generator"), [(None, False), ("bf16", True)])
def test_four_epochs_equal_two_plus_two_bit_for_bit(tmp_path, precision, own_generator):
    es_full, tally_full, cbs_full = _kit(patience=50)
    full_model = _model(precision)
    full = full_model.train(
        _params(tmp_path, 4, own_generator), callbacks=cbs_full, components=[tally_full]
    )

    _, tally_a, cbs_a = _kit(patience=50)
    first = _model(precision).train(
        _params(tmp_path, 2, own_generator), callbacks=cbs_a, components=[tally_a]
    )
    parent_files = _tree_digest(first.run_dir)

    es_b, tally_b, cbs_b = _kit(patience=50)
    resumed_model = _model(precision)
    resumed = resumed_model.train(
        _params(tmp_path, 2, own_generator, resume_from_run_id=first.id),
        callbacks=cbs_b,
        components=[tally_b],
    )

    assert resumed.id not in (first.id, full.id)
    assert resumed.parent_run_id == first.id
    assert resumed.resume_status["mode"] == "stateful"
    assert resumed.resume_status["from_epoch"] == 2
    for want in ("weights", "optimizer", "scheduler", "rng", "EarlyStopping", "RngProbe", "Tally"):
        assert want in resumed.resume_status["restored"]
    # Final weights, bit for bit.
    for (name, a), (_, b) in zip(
        full_model.net.state_dict().items(), resumed_model.net.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    # Optimizer, scheduler, RNG streams and every stateful callback/component.
    _same_training_state(full, resumed)
    assert (es_full.best, es_full.counter) == (es_b.best, es_b.counter)
    assert cbs_full[1].draws == cbs_b[1].draws
    assert tally_full.count == tally_b.count == 4
    assert torch.equal(tally_full.history, tally_b.history)
    # Every logged loss: the child's history continues the parent's.
    assert [p.train_edp.loss for p in full.idps] == [p.train_edp.loss for p in resumed.idps]
    assert _steps(full) == _steps(resumed)
    assert _epochs(full) == _epochs(resumed)
    assert NNRun.load(resumed.id, runs_root=tmp_path).idps == resumed.idps
    # The parent is untouched.
    assert _tree_digest(first.run_dir) == parent_files
    assert NNRun.load(first.id, runs_root=tmp_path).metadata["epochs_completed"] == 2


@pytest.mark.parametrize("precision", [None, "bf16"])
def test_a_split_run_stops_at_the_same_epoch_as_the_uninterrupted_one(tmp_path, precision):
    es_full, tally_full, cbs_full = _kit(patience=2)
    log = CounterLog(es_full)
    full_model = _model(precision)
    full = full_model.train(
        _params(tmp_path, 10), callbacks=[*cbs_full, log], components=[tally_full]
    )
    stop = es_full.stopped_epoch
    assert stop is not None, "the fixture must stop early to test anything"
    assert stop < 10
    # Split where EarlyStopping is mid-count, so its restored counter decides the stop.
    mid_count = [e for e, c in enumerate(log.counters, start=1) if c > 0 and e < stop]
    split = mid_count[-1] if mid_count else stop - 1

    es_a, tally_a, cbs_a = _kit(patience=2)
    first = _model(precision).train(_params(tmp_path, split), callbacks=cbs_a, components=[tally_a])
    assert es_a.stopped_epoch is None
    es_b, tally_b, cbs_b = _kit(patience=2)
    resumed_model = _model(precision)
    resumed = resumed_model.train(
        _params(tmp_path, 10 - split, resume_from_run_id=first.id),
        callbacks=cbs_b,
        components=[tally_b],
    )
    assert es_b.stopped_epoch == stop
    assert len(resumed.epochs) == len(full.epochs) == stop
    assert resumed.metadata["stop_reason"] == full.metadata["stop_reason"]
    for a, b in zip(
        full_model.net.state_dict().values(), resumed_model.net.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)
    _same_training_state(full, resumed)
    assert _steps(full) == _steps(resumed)


def test_resume_twice_chains_histories(tmp_path):
    full_model = _model()
    full = full_model.train(_params(tmp_path, 3))
    one = _model().train(_params(tmp_path, 1))
    two = _model().train(_params(tmp_path, 1, resume_from_run_id=one.id))
    three_model = _model()
    three = three_model.train(_params(tmp_path, 1, resume_from_run_id=two.id))
    assert _steps(three) == _steps(full)
    for a, b in zip(
        full_model.net.state_dict().values(), three_model.net.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)


def test_a_mid_epoch_stop_with_accumulation_resumes_exactly(tmp_path):
    """A Stop between steps writes LAST mid-epoch; resuming replays the order and skips."""

    class StopAt(Callback):
        def __init__(self, step):
            self.step, self.control = step, None

        def on_attach(self, control):
            self.control = control

        def on_step_ended(self, event):
            if event.step == self.step:
                self.control.request_stop("test stop")

    full_model = _model()
    full = full_model.train(_params(tmp_path / "full", 2, accumulation_steps=2))
    steps_per_epoch = 3  # 6 batches of 16, two per update
    first = _model().train(
        _params(tmp_path, 2, accumulation_steps=2), callbacks=[StopAt(steps_per_epoch + 1)]
    )
    assert first.status.value == "stopped"
    _, state = NNCheckpoint.load_with_training_state(run=first.id, runs_root=tmp_path)
    assert state["epoch_complete"] is False
    assert (state["epoch"], state["batches_done"], state["step"]) == (1, 2, 4)
    resumed_model = _model()
    resumed = resumed_model.train(
        _params(tmp_path, 1, accumulation_steps=2, resume_from_run_id=first.id)
    )
    assert resumed.resume_status["epoch_complete"] is False
    assert [s["loss"] for s in _steps(full)] == [s["loss"] for s in _steps(resumed)]
    for a, b in zip(
        full_model.net.state_dict().values(), resumed_model.net.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)


# -- resume_epochs, weights_only and the status ---------------------------------------------
class StopAfterEpoch(Callback):
    """Presses Stop at an epoch's end: the run is "stopped" with a complete LAST."""

    def __init__(self, epoch: int) -> None:
        self.epoch, self.control = epoch, None

    def on_attach(self, control):
        self.control = control

    def on_epoch_ended(self, event):
        if event.epoch == self.epoch:
            self.control.request_stop(f"stopped after epoch {self.epoch}")


def test_planned_epochs_continue_to_the_source_total(tmp_path):
    full_model = _model()
    full_model.train(_params(tmp_path / "full", 3))
    first = _model().train(_params(tmp_path, 3), callbacks=[StopAfterEpoch(1)])
    assert first.status.value == "stopped"
    assert first.metadata["epochs_completed"] == 1
    resumed_model = _model()
    resumed = resumed_model.train(
        _params(tmp_path, 3, resume_from_run_id=first.id, resume_epochs="planned")
    )
    assert resumed.metadata["epochs_completed"] == 3
    assert resumed.resume_status["n_epochs"] == 2
    for a, b in zip(
        full_model.net.state_dict().values(), resumed_model.net.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)
    # The planned total was reached: "planned" refuses, "additional" trains more.
    with pytest.raises(ResumeError, match="already reached its planned 3 epochs"):
        _model().train(_params(tmp_path, 3, resume_from_run_id=resumed.id, resume_epochs="planned"))
    with pytest.raises(ConfigError, match="planned total"):
        _model().train(_params(tmp_path, 5, resume_from_run_id=first.id, resume_epochs="planned"))
    more = _model().train(_params(tmp_path, 1, resume_from_run_id=resumed.id))
    assert more.metadata["epochs_completed"] == 4


def test_weights_only_warm_starts_with_fresh_state(tmp_path):
    _, tally_a, cbs_a = _kit(patience=50)
    first = _model().train(_params(tmp_path, 2), callbacks=cbs_a, components=[tally_a])
    _, tally_b, cbs_b = _kit(patience=50)
    model = _model()
    warm = model.train(
        _params(
            tmp_path,
            1,
            resume_from_run_id=first.id,
            resume_mode="weights_only",
            optim=NNOptimParams(max_lr=1e-3),
        ),  # may change what stateful refuses
        callbacks=cbs_b,
        components=[tally_b],
    )
    assert warm.resume_status["mode"] == "weights_only"
    assert warm.resume_status["restored"] == ["weights"]
    assert tally_b.count == 1  # fresh component: only this run's epoch
    assert len(cbs_b[1].draws) == 1
    assert warm.epochs[-1]["epoch"] == 3  # the history continues the source's
    state = NNCheckpoint.load_training_state(run=warm.id, runs_root=tmp_path)
    assert state["optimizer"]["state"][0]["step"].item() == 6  # one fresh epoch of Adam


def test_stateful_resume_of_a_weights_only_checkpoint_fails_before_restoring(tmp_path):
    from nnx_lab.engine.checkpoint import write_checkpoint

    first = _model().train(_params(tmp_path, 1))
    ckpt = NNCheckpoint.load(run=first.id, runs_root=tmp_path)
    write_checkpoint(
        first.run_dir,
        ["last"],
        model_state=ckpt.model_state,
        training_state=None,
        meta={
            k: ckpt.sidecar[k] for k in ("run_id", "epoch", "step", "net_params", "model_params")
        },
    )
    model = _model()
    weights = {k: v.clone() for k, v in model.net.state_dict().items()}
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ResumeError, match="weights-only"):
        model.train(_params(tmp_path, 1, resume_from_run_id=first.id))
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert all(torch.equal(weights[k], v) for k, v in model.net.state_dict().items())
    warm = model.train(
        _params(tmp_path, 1, resume_from_run_id=first.id, resume_mode="weights_only")
    )
    assert warm.status.value == "finished"


def test_resume_from_best(tmp_path):
    first = _model().train(_params(tmp_path, 3))
    best = NNCheckpoint.load(run=first.id, type=Checkpoints.BEST, runs_root=tmp_path)
    resumed = _model().train(
        _params(tmp_path, 1, resume_from_run_id=first.id, resume_from_checkpoint="best")
    )
    assert resumed.resume_status["checkpoint"] == "best"
    assert resumed.resume_status["from_epoch"] == best.epoch
    assert resumed.epochs[-1]["epoch"] == best.epoch + 1
    assert len(resumed.epochs) == best.epoch + 1


# -- refusals, each before the model or any run is touched ----------------------------------
def _refused(tmp_path, model, params, error, match, callbacks=()):
    weights = {k: v.clone() for k, v in model.net.state_dict().items()}
    before = _tree_digest(tmp_path)
    with pytest.raises(error, match=match):
        model.train(params, callbacks=list(callbacks))
    assert _tree_digest(tmp_path) == before  # no run directory, the source untouched
    assert all(torch.equal(weights[k], v) for k, v in model.net.state_dict().items())


def test_refuses_a_run_id_that_does_not_exist_naming_the_root(tmp_path):
    root = tmp_path / "elsewhere"
    with pytest.raises(FileNotFoundError, match=str(root.resolve())):
        _model().train(_params(root, 1, resume_from_run_id="0" * 32))
    assert not root.exists()


def test_refuses_a_precision_mismatch(tmp_path):
    first = _model("bf16").train(_params(tmp_path, 1))
    _refused(
        tmp_path,
        _model(),
        _params(tmp_path, 1, resume_from_run_id=first.id),
        ResumeError,
        "resume precision mismatch: .* bf16, this model resolves to fp32",
    )
    warm = _model().train(
        _params(tmp_path, 1, resume_from_run_id=first.id, resume_mode="weights_only")
    )
    assert warm.precision.effective == "fp32"  # weights_only may switch


def test_refuses_a_gradscaler_presence_mismatch(tmp_path):
    first = _model().train(_params(tmp_path, 1))
    _edit_state(
        first,
        lambda s: s.update(
            scaler={
                "scale": 1024.0,
                "growth_factor": 2.0,
                "backoff_factor": 0.5,
                "growth_interval": 2000,
                "_growth_tracker": 3,
            }
        ),
    )
    _refused(
        tmp_path,
        _model(),
        _params(tmp_path, 1, resume_from_run_id=first.id),
        ResumeError,
        "resume GradScaler presence mismatch: the checkpoint has GradScaler",
    )


def test_a_checkpoint_without_a_precision_record_counts_a_scaler_as_fp16(tmp_path):
    first = _model().train(_params(tmp_path, 1))
    _edit_state(first, lambda s: s.pop("precision"))
    ok = _model().train(_params(tmp_path, 1, resume_from_run_id=first.id))  # no scaler: fp32
    assert ok.status.value == "finished"
    _edit_state(first, lambda s: s.update(scaler={"scale": 1024.0, "_growth_tracker": 0}))
    _refused(
        tmp_path,
        _model(),
        _params(tmp_path, 1, seed=4, resume_from_run_id=first.id),
        ResumeError,
        r"resume precision mismatch: .* trained in fp16.*GradScaler presence mismatch",
    )


def test_refuses_a_changed_optimizer_topology(tmp_path):
    first = _model().train(_params(tmp_path, 1))
    other = NNModel(
        net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=[16], dropout_prob=0.2),
        params=NNModelParams(),
    )
    other.net.layers[0].weight.requires_grad_(False)  # a frozen layer: another topology
    _refused(
        tmp_path,
        other,
        _params(tmp_path, 1, resume_from_run_id=first.id),
        ResumeError,
        "resume optimizer topology mismatch",
    )
    _refused(
        tmp_path,
        _model(),
        _params(
            tmp_path,
            1,
            resume_from_run_id=first.id,
            optim=NNOptimParams.builder().sgd(max_lr=3e-2).build(),
        ),
        ResumeError,
        "resume optimizer topology mismatch: .* adam .* builds a sgd",
    )


def test_refuses_changed_optimizer_settings(tmp_path):
    first = _model().train(_params(tmp_path, 1))
    _refused(
        tmp_path,
        _model(),
        _params(tmp_path, 1, resume_from_run_id=first.id, optim=NNOptimParams(max_lr=1e-3)),
        ResumeError,
        r"optimizer settings mismatch \(max_lr: 0.03 -> 0.001\)",
    )
    ok = _model().train(
        _params(
            tmp_path,
            1,
            resume_from_run_id=first.id,
            optim=NNOptimParams(max_lr=3e-2, grad_clip_norm=0.5),
        )
    )
    assert ok.status.value == "finished"  # clipping is the loop's, not the optimizer's


def test_refuses_changed_plateau_settings(tmp_path):
    first = _model().train(_params(tmp_path, 1))
    for sched in (NNSchedulerParams(factor=0.1, patience=0), None):
        _refused(
            tmp_path,
            _model(),
            _params(tmp_path, 1, resume_from_run_id=first.id, scheduler=sched),
            ResumeError,
            "resume scheduler mismatch",
        )


def test_refuses_another_training_state_generation(tmp_path):
    first = _model().train(_params(tmp_path, 1))
    _edit_state(first, lambda s: s.update(generation=99))
    _refused(
        tmp_path,
        _model(),
        _params(tmp_path, 1, resume_from_run_id=first.id),
        ResumeError,
        "generation mismatch",
    )
    _edit_state(first, lambda s: (s.update(generation=1), s.pop("optimizer_topology")))
    _refused(
        tmp_path,
        _model(),
        _params(tmp_path, 1, resume_from_run_id=first.id),
        ResumeError,
        "lacks optimizer_topology",
    )


def test_refuses_another_network(tmp_path):
    first = _model().train(_params(tmp_path, 1))
    other = NNModel(net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=[17]))
    _refused(
        tmp_path,
        other,
        _params(tmp_path, 1, resume_from_run_id=first.id),
        ResumeError,
        "resume network mismatch",
    )


def _edit_state(run, change):
    """Rewrite a run's LAST training state in place (to fake other writers)."""
    from nnx_lab.engine.checkpoint import write_checkpoint

    ckpt = NNCheckpoint.load(run.id, runs_root=run.run_dir.parent)
    state = ckpt.training_state_tree()
    change(state)
    meta = {
        k: ckpt.sidecar[k]
        for k in ("run_id", "epoch", "step", "epoch_complete", "net_params", "model_params")
    }
    write_checkpoint(
        run.run_dir, ["last"], model_state=ckpt.model_state, training_state=state, meta=meta
    )


# -- probes and the sidecar ------------------------------------------------------------------
def test_probing_a_never_written_run_creates_nothing(tmp_path):
    root = tmp_path / "runs"
    assert NNCheckpoint.load_with_training_state(run="f" * 32, runs_root=root) == (None, None)
    assert NNCheckpoint.load_with_training_state(
        run="f" * 32, type=Checkpoints.BEST, runs_root=root
    ) == (None, None)
    assert not root.exists()


def test_load_training_state_holds_precision_and_scaler(tmp_path):
    first = _model("bf16").train(_params(tmp_path, 1))
    assert first.precision.record()["effective"] == "bf16"
    state = NNCheckpoint.load_training_state(
        run=first.id, type=Checkpoints.LAST, runs_root=tmp_path
    )
    assert state["precision"]["effective"] == "bf16"
    assert state["scaler"] is None
    assert state["epoch"] == 1
    assert state["epoch_complete"] is True
    ckpt, state2 = NNCheckpoint.load_with_training_state(run=first.id, runs_root=tmp_path)
    assert ckpt.epoch == 1
    assert state2["precision"] == state["precision"]


def test_the_sidecar_is_data_only(tmp_path):
    first = _model().train(_params(tmp_path, 1), callbacks=[EarlyStopping(patience=3)])
    folder = first.run_dir / "checkpoints"
    for f in folder.iterdir():
        assert f.suffix in (".json", ".safetensors"), f.name
        head = f.read_bytes()[:4]
        assert head[:1] != b"\x80"  # no pickle protocol header
        assert head != b"PK\x03\x04"  # nor torch.save's zip
    sidecar = json.loads((folder / "last.json").read_text())
    state = sidecar["training_state"]
    assert state["rng"]["torch_cpu"] == {"__tensor__": "state.rng.torch_cpu"}
    assert state["rng"]["numpy"]["__tuple__"][0] == "MT19937"
    assert state["callbacks"]["0:EarlyStopping"]["counter"] == 0


def test_a_sampler_with_its_own_generator_continues(tmp_path):
    from torch.utils.data import RandomSampler

    def params(n, **kw):
        X, y, _, _ = _data()
        ds = TensorDataset(X, y)
        sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(5))
        return _params(
            tmp_path, n, train_loader=DataLoader(ds, batch_size=16, sampler=sampler), **kw
        )

    full_model = _model()
    full = full_model.train(params(3))
    first = _model().train(params(1))
    resumed_model = _model()
    resumed = resumed_model.train(params(2, resume_from_run_id=first.id))
    assert _steps(full) == _steps(resumed)
    for a, b in zip(
        full_model.net.state_dict().values(), resumed_model.net.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)


def test_a_list_of_batches_resumes_exactly(tmp_path):
    X, y, _, _ = _data()
    batches = [(X[i : i + 16], y[i : i + 16]) for i in range(0, 96, 16)]
    full_model = _model()
    full = full_model.train(_params(tmp_path, 2, train_loader=batches, val_loader=None))
    first = _model().train(_params(tmp_path, 1, train_loader=batches, val_loader=None))
    resumed_model = _model()
    resumed = resumed_model.train(
        _params(tmp_path, 1, train_loader=batches, val_loader=None, resume_from_run_id=first.id)
    )
    assert _steps(full) == _steps(resumed)
    for a, b in zip(
        full_model.net.state_dict().values(), resumed_model.net.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)


def test_probing_an_existing_run_writes_nothing_not_even_a_lock(tmp_path):
    """Readers never write (issue 20): loading takes no lock, so a read-only runs root
    loads (tests/python/engine/test_readers_never_write.py)."""
    first = _model().train(_params(tmp_path, 1))
    lock = first.run_dir / ".lock"
    lock.unlink()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    ckpt, state = NNCheckpoint.load_with_training_state(run=first.id, runs_root=tmp_path)
    assert ckpt.epoch == state["epoch"] == 1
    assert not lock.exists()
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
