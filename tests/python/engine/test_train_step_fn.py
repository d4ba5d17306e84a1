"""``train(train_step_fn=)``: a step that owns the update, and the refusals before any
run (a step with an objective, either in the other's place, a reduced policy for a
full-precision-only step, compile=)."""

from __future__ import annotations

import dataclasses
import functools
import json

import pytest
import torch

from nnx_lab import (
    EDP,
    LossTerm,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    Objective,
    ObjectiveResult,
    TrainStepContext,
    default_train_step,
    supervised_objective,
)
from nnx_lab.errors import ConfigError
from nnx_lab.precision import full_precision_only

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _data(n=32):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 6, generator=g)
    y = (X @ torch.randn(6, 3, generator=g)).argmax(1)
    return [(X[i : i + 8], y[i : i + 8]) for i in range(0, n, 8)]


def _model(**kw):
    return NNModel(
        net_params=NNParams(input_dim=6, output_dim=3, hidden_dims=[8]),
        params=NNModelParams(**kw),
    )


def _params(root=None, **kw):
    return NNTrainParams(
        n_epochs=2,
        train_loader=_data(),
        optim=NNOptimParams(max_lr=1e-2, grad_clip_norm=0.5),
        runs_root=None if root is None else str(root),
        **kw,
    )


def _steps(run):
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    return [x for x in lines if x["event"] == "step"]


def test_a_step_delegating_to_default_train_step_trains_as_the_default(tmp_path):
    seen = []

    def step(ctx: TrainStepContext) -> EDP:
        assert isinstance(ctx, TrainStepContext)
        seen.append((ctx.epoch_idx, ctx.batch_idx, ctx.is_last_batch))
        return default_train_step(ctx)

    plain, custom = _model(), _model()
    a = plain.train(_params(tmp_path / "a"))
    b = custom.train(_params(tmp_path / "b"), train_step_fn=step)
    for name, weight in plain.net.state_dict().items():
        assert torch.equal(weight, custom.net.state_dict()[name]), name
    assert [s["loss"] for s in _steps(a)] == [s["loss"] for s in _steps(b)]
    assert seen[:4] == [(1, 0, False), (1, 1, False), (1, 2, False), (1, 3, True)]
    assert a.id != b.id  # the step's code enters the run id
    ctx = TrainStepContext(*([None] * 13))
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.batch = 1  # type: ignore[misc]


def test_the_run_counts_the_updates_the_step_reports(tmp_path):
    def twice(ctx):
        for _ in range(2):
            edp = default_train_step(ctx)
        ctx.accumulation_state["calls"] = ctx.accumulation_state.get("calls", 0) + 1
        return edp

    run = _model().train(_params(tmp_path), train_step_fn=twice)
    assert [s["step"] for s in _steps(run)] == [2, 4, 6, 8, 10, 12, 14, 16]


class _CountingTerms:
    """A step whose two logged terms name the step they came from."""

    def __init__(self):
        self.calls, self.terms = 0, None

    def __call__(self, ctx):
        self.calls += 1
        a, b = torch.tensor(float(self.calls)), torch.tensor(-10.0 * self.calls)
        self.terms = ({"a": a, "b": b}, {"a": (a * 8, 8), "b": (b * 8, 8)})
        return default_train_step(ctx)

    def current_terms(self):
        return self.terms


def test_each_step_line_holds_its_own_steps_terms_across_read_backs(tmp_path):
    run = _model().train(_params(tmp_path, log_every=3), train_step_fn=_CountingTerms())
    steps = _steps(run)
    # 8 steps in read-backs of 3, 1, 3, 1: each line's terms are its own step's, in order
    assert [s["terms"] for s in steps] == [{"a": n, "b": -10.0 * n} for n in range(1, 9)]
    assert [s["step"] for s in steps] == list(range(1, 9))
    order = ["event", "step", "epoch", "batch", "lr", "samples", "loss", "error", "accuracy"]
    assert list(steps[0]) == [*order, "precision", "recall", "f1", "terms"]


def _objective():
    return Objective(lambda net, batch, ctx: ObjectiveResult([LossTerm("a", net(batch[0]).sum())]))


def test_a_step_and_an_objective_together_or_swapped_are_refused(runs_root):
    with pytest.raises(ConfigError, match="not both"):
        _model().train(_params(), train_step_fn=default_train_step, objective=_objective())
    with pytest.raises(ConfigError, match="pass it as objective="):
        _model().train(_params(), train_step_fn=supervised_objective())
    with pytest.raises(ConfigError, match="train_step_fn"):
        _model().train(_params(), objective=default_train_step)
    assert not runs_root.exists() or not any(runs_root.iterdir())


def test_a_full_precision_step_refuses_a_reduced_policy_through_wraps(runs_root):
    @full_precision_only
    def exact(ctx):
        return default_train_step(ctx)

    @functools.wraps(exact)
    def wrapper(ctx):
        return exact(ctx)

    with pytest.raises(ConfigError, match="full_precision_only"):
        _model(precision="bf16").train(_params(), train_step_fn=wrapper)
    assert not runs_root.exists() or not any(runs_root.iterdir())
    run = _model().train(_params(), train_step_fn=wrapper)  # fp32 trains
    assert len(_steps(run)) == 8


def test_compile_with_a_step_is_refused_with_the_reason(runs_root):
    with pytest.raises(ConfigError, match="compile=False"):
        _model(compile=True).train(_params(), train_step_fn=default_train_step)
