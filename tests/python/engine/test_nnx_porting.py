"""Issue 29: code written for NNx 0.4.1 behaves the same with ``nnx_lab`` (the behaviour
differences of the engine; docs/nnx_differences.md lists the ones kept on purpose)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import engine_factories as f
import pytest
import torch
import yaml
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import NNRun, ProbabilitySpec, ResumeError, RunRecordError
from nnx_lab.engine.events import StepMetrics
from nnx_lab.errors import DataError, NNxError
from nnx_lab.runs import set_config_report


def _empty_loader() -> DataLoader:
    return DataLoader(TensorDataset(torch.zeros(0, 8), torch.zeros(0).long()), batch_size=4)


@pytest.mark.parametrize("surface", ["predict", "predict_proba"])
def test_an_empty_loader_is_refused_and_the_modes_are_restored(surface):
    model = f.model()
    model.net.train()
    call = getattr(model, surface)
    args = (ProbabilitySpec(kind="categorical"),) if surface == "predict_proba" else ()
    with pytest.raises(ValueError, match=rf"{surface}\(\) loader produced zero batches"):
        call(_empty_loader(), *args)
    assert model.net.training
    with pytest.raises(DataError, match="zero batches"):
        call([], *args)  # an empty list of batches is a loader too
    # an empty tensor is an empty question: an empty answer
    assert len(model.predict(torch.zeros(0, 8))) == 0


def test_an_unreadable_input_is_a_type_error():
    model = f.model()
    for bad in ([object()], object()):
        with pytest.raises(TypeError) as caught:
            model.predict(X=bad)
        assert isinstance(caught.value, DataError)  # and still the ValueError it was


def test_resuming_a_missing_run_is_a_value_error_and_still_file_not_found(runs_root):
    model = f.model()
    params = f.train_params(runs_root, n_epochs=1, resume_from_run_id="0" * 32)
    with pytest.raises(ValueError, match="no such run") as caught:
        model.train(params)
    assert isinstance(caught.value, ResumeError)
    assert isinstance(caught.value, FileNotFoundError)
    assert not runs_root.exists() or not any(runs_root.iterdir())


def test_a_python_tag_in_run_yaml_is_a_yaml_error_and_a_run_record_error(runs_root):
    run = f.model().train(f.train_params(runs_root, n_epochs=1))
    path = run.run_dir / "run.yaml"
    path.write_text("a: !!python/object/apply:os.system ['echo no']\n")
    with pytest.raises(yaml.YAMLError) as caught:
        NNRun.load(run.id, runs_root=runs_root)
    assert isinstance(caught.value, RunRecordError)


def test_a_nan_fp32_loss_raises_before_the_weights_change(runs_root):
    X = torch.randn(64, 8)
    y = torch.randint(0, 3, (64,))
    X[40] = float("nan")  # batch 2 of 32 rows
    batches = [(X[:32], y[:32]), (X[32:], y[32:])]
    model = f.model()
    params = f.train_params(runs_root, n_epochs=1, train_loader=batches, val_loader=None)
    before = {}

    seen = []

    class Keep:
        def on_step_ended(self, event):
            before.update({k: v.clone() for k, v in model.net.state_dict().items()})

        def on_step_metrics(self, event):
            seen.append(event)

    with pytest.raises(FloatingPointError, match="non-finite training loss at step 2") as caught:
        model.train(params, callbacks=[Keep()])
    assert isinstance(caught.value, NNxError)
    after = model.net.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in after)  # step 2 never applied
    assert all(bool(torch.isfinite(v).all()) for v in after.values())
    # the log (and so the monitor) still shows where it went wrong: step 2's loss
    records = [r for e in seen if isinstance(e, StepMetrics) for r in e.records]
    assert [r.step for r in records] == [1, 2]
    assert math.isfinite(records[0].loss)
    assert math.isnan(records[1].loss)
    run_dir = next(runs_root.iterdir())
    logged = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [(d["step"], d["loss"]) for d in logged if d.get("event") == "step"]
    assert steps[-1][0] == 2
    assert math.isnan(steps[-1][1])


def test_train_ends_with_the_run_saved_line(runs_root, capsys, monkeypatch):
    set_config_report(None)
    try:
        monkeypatch.chdir(runs_root.parent)
        run = f.model().train(f.train_params("runs", n_epochs=1))
        out = capsys.readouterr().out
        assert f"Run saved to runs/{run.id} (relative to the working directory)" in out
        set_config_report(False)  # the switch every printed report follows
        f.model().train(f.train_params("runs", n_epochs=1, overwrite_existing=True))
        assert "Run saved" not in capsys.readouterr().out
    finally:
        set_config_report(None)
    assert os.path.isdir(runs_root / run.id)


# -- callbacks and EarlyStopping (NNx's protocol) -------------------------------------------
def test_a_callback_subclass_overrides_any_subset_of_nnx_hooks(runs_root):
    from nnx_lab import Callback, Checkpoints, NNCheckpoint

    base = Callback()
    for hook in ("on_train_begin", "on_epoch_begin", "on_epoch_end", "on_train_end"):
        assert getattr(base, hook)(None) is None  # the base hooks are no-ops
    assert base.checkpoint_transforms() == ()
    assert Callback.distributed is None

    class Ends(Callback):
        def __init__(self):
            self.epochs, self.last = [], None

        def on_epoch_end(self, ctx):
            self.epochs.append(ctx.epoch)
            self.last = ctx.idp

        def on_train_end(self, ctx):
            ctx.model.net.register_buffer("marker", torch.ones(1))

    cb = Ends()
    run = f.model().train(f.train_params(runs_root, n_epochs=2), callbacks=[cb, Callback()])
    assert cb.epochs == [1, 2]  # nnx-lab counts epochs from 1 (docs/nnx_differences.md)
    assert cb.last is run.idps[-1]
    last = NNCheckpoint.load(run.id, Checkpoints.LAST, runs_root)
    assert "marker" in last.model_state  # on_train_end ran before LAST was written
    best = NNCheckpoint.load(run.id, Checkpoints.BEST, runs_root)
    assert "marker" not in best.model_state


def test_early_stopping_takes_nnx_arguments_and_ours():
    from nnx_lab import EarlyStopping, MonitorSpec

    nnx = EarlyStopping("val_edp.loss", 3, mode="max", name="es")
    assert (nnx.monitor, nnx.patience, nnx.mode, nnx.name) == ("val_edp.loss", 3, "max", "es")
    ours = EarlyStopping(3, "val_edp.loss", 0.1)
    assert (ours.monitor, ours.patience, ours.min_delta, ours.mode) == (
        "val_edp.loss",
        3,
        0.1,
        "min",
    )
    assert EarlyStopping(None, 4).patience == 4
    assert EarlyStopping(5).selected_monitor is None  # chosen at the first validated epoch
    with pytest.raises(ValueError, match="mode='max' requires an explicit monitor"):
        EarlyStopping(mode="max")
    with pytest.raises(ValueError, match="'min' or 'max'"):
        EarlyStopping(mode="up")
    with pytest.raises(ValueError, match="own mode"):
        EarlyStopping(monitor=MonitorSpec("accuracy"), mode="max")


def test_early_stopping_max_mode_counts_a_rise_as_improvement():
    import math

    from nnx_lab import EarlyStopping, TrainingControl
    from nnx_lab.engine.events import EpochEnded

    es = EarlyStopping("train_edp.loss", 1, mode="max")
    control = TrainingControl()
    es.on_attach(control)

    def epoch(n, value):
        return EpochEnded(
            epoch=n,
            step=n,
            lr=0.1,
            train={},
            val=None,
            signal=None,
            signal_source=None,
            improved=False,
            seconds=0.0,
            train_last={"loss": value},
        )

    es.on_epoch_ended(epoch(1, 1.0))
    es.on_epoch_ended(epoch(2, 2.0))  # a rise: better under mode="max"
    assert es.counter == 0
    assert es.best == 2.0
    es.on_epoch_ended(epoch(3, math.nan))  # never the best; counts
    assert es.stopped_epoch == 3


def test_early_stopping_warns_in_nnx_words_without_validation(runs_root):
    from nnx_lab import EarlyStopping

    params = f.train_params(runs_root, n_epochs=1, val_loader=None)
    with pytest.warns(RuntimeWarning, match="epoch 1 has no validation data point"):
        f.model().train(params, callbacks=[EarlyStopping()])


# -- specs and params -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "labels", [("a", ""), ("a", " "), ("only",)], ids=["empty", "blank", "one-categorical"]
)
def test_a_spec_refuses_an_empty_label_and_a_one_label_categorical(labels):
    from nnx_lab import PredictionValidationError

    with pytest.raises(PredictionValidationError):
        ProbabilitySpec(kind="categorical", labels=labels)
    assert ProbabilitySpec(kind="bernoulli", labels=("only",)).labels == ("only",)


def test_hidden_dims_none_is_no_hidden_layer(runs_root):
    from nnx_lab import NNParams

    none = NNParams(input_dim=8, output_dim=3, hidden_dims=None)
    assert none == NNParams(input_dim=8, output_dim=3, hidden_dims=[])
    model = f.model(net={"hidden_dims": None})
    assert len(model.predict(torch.randn(4, 8))) == 4


# -- evaluate() with a custom loss module: batches combine as one pass over the split ------
def _batches(X, y, size):
    return [(X[i : i + size], y[i : i + size]) for i in range(0, len(X), size)]


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.nn.CrossEntropyLoss(reduction="sum"),
        lambda: torch.nn.CrossEntropyLoss(weight=torch.tensor([0.2, 1.0, 3.0])),
        lambda: torch.nn.CrossEntropyLoss(weight=torch.tensor([0.2, 1.0, 3.0]), ignore_index=1),
        lambda: torch.nn.NLLLoss(ignore_index=2),
    ],
    ids=["sum", "weighted", "weighted-ignored", "nll-ignored"],
)
def test_evaluate_combines_a_custom_loss_as_one_combined_batch(make):
    g = torch.Generator().manual_seed(3)
    X, y = torch.randn(50, 8, generator=g), torch.randint(0, 3, (50,), generator=g)
    model = f.model()
    model.loss_fn = make()
    with torch.no_grad():
        out = model.net.eval()(X)
    expected = float(make()(out, y))
    got = model.evaluate(_batches(X, y, 16)).loss  # uneven: 16, 16, 16, 2
    assert got == pytest.approx(expected, rel=1e-5)


def test_evaluate_combines_an_elementwise_custom_loss():
    g = torch.Generator().manual_seed(4)
    X, y = torch.randn(30, 8, generator=g), torch.randn(30, 3, generator=g)
    for reduction in ("mean", "sum"):
        model = f.model(loss=nnx_losses().MEAN_SQUARED_ERROR)
        model.loss_fn = torch.nn.MSELoss(reduction=reduction)
        with torch.no_grad():
            out = model.net.eval()(X)
        expected = float(torch.nn.MSELoss(reduction=reduction)(out, y))
        assert model.evaluate(_batches(X, y, 7)).loss == pytest.approx(expected, rel=1e-5)


def nnx_losses():
    from nnx_lab import Losses

    return Losses


def test_errors_of_kept_differences_name_the_differences_page():
    from nnx_lab import EarlyStopping, ExperimentPlan, NNParams, NNTrainParams

    cases = [
        lambda: NNParams(input_dim=8, output_dim=3, dropout_prob=1.0),
        lambda: EarlyStopping(patience=0),
        lambda: NNTrainParams(seed=-5),
        lambda: ExperimentPlan().with_optim("adam"),
        lambda: ProbabilitySpec.from_state({"kind": "categorical", "class_axis": -1}),
    ]
    for make in cases:
        with pytest.raises(ValueError, match=r"docs/nnx_differences\.md"):
            make()
    assert (Path(__file__).parents[3] / "docs" / "nnx_differences.md").is_file()


def test_the_legacy_flag_beside_an_fp16_policy_keeps_the_policys_run_id(runs_root):
    from nnx_lab import NNModelParams, PrecisionPolicy

    policy = PrecisionPolicy("fp16", fallback="fp32")
    both = NNModelParams(mixed_precision=True, precision=policy)
    assert both.mixed_precision is False
    assert both == NNModelParams(precision=policy)
    params = f.train_params(runs_root, n_epochs=1)
    assert f.model(mixed_precision=True, precision=policy).expected_run_id(params) == f.model(
        precision=policy
    ).expected_run_id(params)
    assert NNModelParams(mixed_precision=True).mixed_precision is True  # alone, it stays


def test_predict_and_evaluate_resolve_a_policy_swapped_into_params():
    from nnx_lab import PrecisionPolicy, PrecisionUnsupportedError

    model = f.model()
    X = torch.randn(16, 8)
    fp32 = model.predict(X).logits
    model.params = model.params.replace(precision=PrecisionPolicy("bf16"))
    assert model.predict(X).logits.dtype == torch.float32
    assert not torch.equal(model.predict(X).logits, fp32)  # computed under bf16 autocast
    assert model.precision.effective == "bf16"
    model.params = model.params.replace(precision=PrecisionPolicy("fp16"))  # no fallback
    with pytest.raises(PrecisionUnsupportedError):
        model.predict(X)
    with pytest.raises(PrecisionUnsupportedError):
        model.evaluate([(X, torch.zeros(16).long())])


def test_a_fractional_epoch_count_edited_into_run_yaml_is_refused_naming_it(runs_root):
    run = f.model().train(f.train_params(runs_root, n_epochs=1))
    path = run.run_dir / "run.yaml"
    record = yaml.safe_load(path.read_text())
    record["train"]["n_epochs"] = 1.5
    path.write_text(yaml.safe_dump(record))
    with pytest.raises(ValueError, match=r"n_epochs.*1\.5"):
        NNRun.load(run.id, runs_root=runs_root)


def test_hidden_dims_is_an_immutable_list_equal_to_a_list():
    import copy
    import pickle

    from nnx_lab import NNParams

    p = NNParams(input_dim=8, output_dim=3, hidden_dims=(32, 16))
    assert isinstance(p.hidden_dims, list)
    assert p.hidden_dims == [32, 16]
    assert p.hidden_dims == (32, 16)  # nnx-lab's tuple still compares equal
    for change in (
        lambda d: d.append(8),
        lambda d: d.__setitem__(0, 1),
        lambda d: d.extend([1]),
        lambda d: d.pop(),
    ):
        with pytest.raises(TypeError, match="immutable"):
            change(p.hidden_dims)
    assert p.hidden_dims == [32, 16]
    assert hash(p) == hash(NNParams(input_dim=8, output_dim=3, hidden_dims=[32, 16]))
    assert pickle.loads(pickle.dumps(p)) == p
    assert copy.deepcopy(p) == p
    assert type(p.to_json()["hidden_dims"]) is list


def test_kept_a_partial_streaming_step_computes_extra_metrics(runs_root):
    import functools

    from nnx_lab import streaming_eval_step

    seen = []

    def count(y_true, y_pred):
        seen.append(len(y_true))
        return float(len(y_true))

    params = f.train_params(runs_root, n_epochs=1).replace(extra_metrics={"rows": count})
    run = f.model().train(params, eval_step_fn=functools.partial(streaming_eval_step))
    assert run.idps[-1].val_edp.extra["rows"] == 64.0


def test_kept_a_plan_without_with_train_trains_with_the_library_defaults():
    from nnx_lab import ExperimentPlan

    plan = ExperimentPlan().with_epochs(3)
    assert plan.value("train.n_epochs") == 3
    fields = {p.field for p in plan.validate()}
    assert not any(name.startswith("train") for name in fields)  # only net / data missing
