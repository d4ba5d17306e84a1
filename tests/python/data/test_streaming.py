"""§2.21: model.iter_predict, StreamingMetrics over a stream, streaming_eval_step and the
eval_step_fn seam of NNModel.train."""

from __future__ import annotations

import gc
import weakref

import engine_factories as f
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    EDP,
    ConfigError,
    DataError,
    Losses,
    MetricSpec,
    NNModel,
    NNModelParams,
    NNParams,
    NNRun,
    PredictionBatch,
    PredictionResult,
    PredictionValidationError,
    ProbabilitySpec,
    StreamingMetrics,
    streaming_eval_step,
)
from nnx_lab.engine.evaluate import evaluate

SPEC = ProbabilitySpec("categorical", labels=("a", "b", "c"))


def _loader(n=300, batch=64, shuffle=False, seed=0, classes=3):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 8, generator=g)
    y = torch.randint(0, classes, (n,), generator=g)
    return DataLoader(TensorDataset(X, y), batch_size=batch, shuffle=shuffle), X, y


# -- iter_predict ------------------------------------------------------------------------------
def test_streamed_batches_concatenate_to_predict_and_predict_proba():
    model = f.model()
    loader, _, _ = _loader()
    with model.iter_predict(loader) as stream:
        batches = list(stream)
    assert [len(b) for b in batches] == [64, 64, 64, 64, 44]  # one per loader batch, in order
    assert all(isinstance(b, PredictionBatch) for b in batches)
    plain = model.predict(loader)
    assert torch.equal(torch.cat([b.logits for b in batches]), plain.logits)
    assert torch.equal(torch.cat([b.classes for b in batches]), plain.classes)
    assert np.concatenate([b.sample_ids for b in batches]).tolist() == list(range(300))
    with model.iter_predict(loader, rich=True, spec=SPEC) as stream:
        rich = list(stream)
    full = model.predict_proba(loader, SPEC)
    assert all(isinstance(b, PredictionResult) for b in rich)
    assert torch.equal(torch.cat([b.probabilities for b in rich]), full.probabilities)
    assert torch.equal(torch.cat([b.decoded for b in rich]), full.decoded)


def test_a_large_tensor_streams_in_predicts_own_chunks():
    model = f.model()
    X = torch.randn(9000, 8)
    with model.iter_predict(X) as stream:
        sizes = [len(b) for b in stream]
    assert sizes == [4096, 4096, 808]
    with model.iter_predict(X) as stream:
        assert torch.equal(torch.cat([b.logits for b in stream]), model.predict(X).logits)


def test_each_batch_hands_back_the_models_modes_and_grad():
    model = NNModel(
        net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=[16], dropout_prob=0.5),
        params=NNModelParams(),
    )
    model.net.train()
    frozen = model.net.layers[0]
    frozen.eval()
    loader, _, _ = _loader()
    seen = []
    with model.iter_predict(loader) as stream:
        for batch in stream:
            # between batches the caller sees its own network: its modes, grad on
            seen.append((model.net.training, frozen.training, torch.is_grad_enabled()))
            assert not batch.logits.requires_grad
    assert seen == [(True, False, True)] * 5
    with model.iter_predict(loader) as stream:
        again = torch.cat([b.logits for b in stream])
    with model.iter_predict(loader) as stream:
        # dropout was off inside (eval), so two passes agree
        assert torch.equal(torch.cat([b.logits for b in stream]), again)


def test_leaving_the_block_early_closes_the_stream_and_drops_its_references():
    model = f.model()
    loader, _, _ = _loader()
    model_ref = weakref.ref(model)
    with model.iter_predict(loader) as stream:
        for _ in stream:
            break
    assert stream.closed
    with pytest.raises(RuntimeError, match="this one is closed"):
        iter(stream)
    del model
    gc.collect()
    assert model_ref() is None  # the closed stream holds no reference to the model
    assert sum(len(X) for X, _ in loader) == 300  # the loader stays the caller's, usable


def test_a_stream_is_one_pass_read_inside_its_with_block():
    model = f.model()
    loader, _, _ = _loader()
    stream = model.iter_predict(loader)
    with pytest.raises(RuntimeError, match="inside its with block"):
        iter(stream)
    with stream:
        list(stream)
        with pytest.raises(RuntimeError, match="one pass"):
            iter(stream)
    with pytest.raises(RuntimeError, match="already opened"), stream:
        pass


def test_iter_predict_refuses_bad_requests_before_streaming():
    model = f.model()
    loader, _, _ = _loader()
    with pytest.raises(PredictionValidationError, match="declares no task"):
        model.iter_predict(loader, rich=True)
    with pytest.raises(ConfigError, match="rich"):
        model.iter_predict(loader, rich="yes")
    with pytest.raises(ConfigError, match="applies to rich=True"):
        model.iter_predict(loader, spec=SPEC)
    for bad in (42, "features.csv"):
        with pytest.raises(DataError, match="not a supported input"):
            model.iter_predict(bad)
        with pytest.raises(DataError, match="not a supported input"):
            model.predict(bad)
    with pytest.raises(PredictionValidationError, match="2 labels"):
        model.iter_predict(
            loader, rich=True, spec=ProbabilitySpec("categorical", labels=("a", "b"))
        )


def test_a_shuffling_loader_warns_when_the_stream_is_made():
    loader, _, _ = _loader(shuffle=True)
    with pytest.warns(UserWarning, match="positions"):
        model_stream = f.model().iter_predict(loader)
    model_stream.close()


def test_streaming_metrics_over_a_rich_stream_equal_one_shot_metrics():
    model = f.model()
    loader, _, y = _loader()
    names = ["nll", "brier", "accuracy", "auroc", "ece", "f1"]
    streamed = StreamingMetrics([MetricSpec(n) for n in names], SPEC)
    with model.iter_predict(loader, rich=True, spec=SPEC) as stream:
        for batch in stream:
            streamed.update(y[batch.sample_ids], probabilities=batch.probabilities)
    one = StreamingMetrics([MetricSpec(n) for n in names], "categorical")
    one.update(y, probabilities=model.predict_proba(loader, SPEC).probabilities)
    assert streamed.finalize().values == pytest.approx(one.finalize().values, rel=1e-12)


# -- streaming_eval_step -----------------------------------------------------------------------
def _edp_equal(a: EDP, b: EDP) -> None:
    assert a.samples == b.samples
    assert a.loss == b.loss  # the same summed losses and denominator
    for name in ("error", "accuracy", "precision", "recall", "f1"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x == pytest.approx(y, rel=1e-12, abs=1e-15), name


@pytest.mark.parametrize("case", ["categorical", "ignore_index", "bce", "bce_multi", "mse", "nll"])
def test_streaming_eval_step_equals_evaluate(case):
    g = torch.Generator().manual_seed(5)
    X = torch.randn(200, 8, generator=g)
    out_dim, loss = 3, Losses.CROSS_ENTROPY
    y = torch.randint(0, 3, (200,), generator=g)
    if case == "ignore_index":
        y[::7] = -100
    elif case == "nll":
        loss = Losses.NEGATIVE_LOG_LIKELIHOOD
    elif case == "bce":
        out_dim, loss = 1, Losses.BINARY_CROSS_ENTROPY
        y = torch.randint(0, 2, (200,), generator=g).float()
    elif case == "bce_multi":
        out_dim, loss = 4, Losses.BINARY_CROSS_ENTROPY
        y = torch.randint(0, 2, (200, 4), generator=g).float()
    elif case == "mse":
        out_dim, loss = 2, Losses.MEAN_SQUARED_ERROR
        y = torch.randn(200, 2, generator=g)
    model = NNModel(
        net_params=NNParams(input_dim=8, output_dim=out_dim, hidden_dims=[16], dropout_prob=0.0),
        params=NNModelParams(loss=loss),
    )
    loader = DataLoader(TensorDataset(X, y), batch_size=48)
    task = model.task()
    args = (model.net, loader, model.loss_fn, task)
    kw = {"device": model.device, "precision": model.precision}
    _edp_equal(streaming_eval_step(*args, **kw), evaluate(*args, **kw))


def test_training_with_streaming_eval_step_gives_the_default_validation_records(runs_root):
    default = f.model().train(f.train_params(runs_root, n_epochs=3))
    streamed = f.model().train(
        f.train_params(runs_root, n_epochs=3), eval_step_fn=streaming_eval_step
    )
    assert streamed.id != default.id  # the evaluator enters the run id
    epochs = [[i.val_edp for i in run.idps if i.val_edp is not None] for run in (streamed, default)]
    assert len(epochs[0]) == len(epochs[1]) == 3
    for a, b in zip(*epochs, strict=True):
        _edp_equal(a, b)
    assert [e["signal"] for e in streamed.epochs] == [e["signal"] for e in default.epochs]
    reloaded = NNRun.load(streamed.id, runs_root=runs_root)
    assert reloaded.config["eval_step"]["name"].endswith("streaming_eval_step")


def test_eval_step_fn_is_called_once_per_epoch_in_place_of_evaluate(runs_root):
    calls = []

    def spy(net, loader, loss, task, *, device, precision):
        calls.append((loader, net.training))
        return EDP(loss=1.0, error=0.5, samples=7)

    params = f.train_params(runs_root, n_epochs=2)
    run = f.model().train(params, eval_step_fn=spy)
    assert calls == [(params.val_loader, True), (params.val_loader, True)]
    assert [i.val_edp.error for i in run.idps if i.val_edp is not None] == [0.5, 0.5]


def test_a_bad_eval_step_fn_is_refused_before_the_run_exists(runs_root):
    # a one-argument function is the context form, eval_step_fn(ctx) (issue 24); two
    # positional arguments fit neither form
    for bad in (42, lambda net, loader: None):
        with pytest.raises(ConfigError, match="eval_step_fn"):
            f.model().train(f.train_params(runs_root), eval_step_fn=bad)
    assert f.runs_in(runs_root) == []


def test_an_eval_step_fn_that_returns_no_edp_fails_the_run_naming_it(runs_root):
    def wrong(net, loader, loss, task, *, device, precision):
        return {"loss": 1.0}

    with pytest.raises(TypeError, match=r"eval_step_fn .*wrong returned dict"):
        f.model().train(f.train_params(runs_root, n_epochs=1), eval_step_fn=wrong)
    (run_dir,) = f.runs_in(runs_root)
    assert "failed" in (run_dir / "metadata.yaml").read_text()
