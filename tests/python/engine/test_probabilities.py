"""§2.13: ProbabilitySpec, predict_proba, prediction_from_logits, sample ids, and every
refusal (PredictionValidationError)."""

from __future__ import annotations

import json
import warnings

import engine_factories as f
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    ConfigError,
    Losses,
    NNModel,
    NNModelParams,
    NNParams,
    PrecisionPolicy,
    PredictionResult,
    PredictionValidationError,
    ProbabilitySpec,
    prediction_from_logits,
)

SPEC = ProbabilitySpec(kind="categorical", class_axis=1, labels=("cat", "dog", "fox"))


class _ForwardCount:
    def __init__(self, module: torch.nn.Module) -> None:
        self.calls = 0
        self.dtypes: list[torch.dtype] = []
        module.register_forward_hook(self._hook)

    def _hook(self, module, inputs, out) -> None:
        self.calls += 1
        self.dtypes.append(out.dtype)


# -- predict_proba against predict -------------------------------------------------------------
@pytest.mark.parametrize("kind", ["tensor", "array", "tuple", "loader"])
def test_predict_proba_equals_predict_on_every_input_kind(kind):
    model = f.model()
    X = torch.randn(300, 8, generator=torch.Generator().manual_seed(1))
    y = torch.zeros(300, dtype=torch.long)
    source = {
        "tensor": X,
        "array": X.numpy(),
        "tuple": (X, y),
        "loader": DataLoader(TensorDataset(X, y), batch_size=64),
    }[kind]
    plain = model.predict(source)
    result = model.predict_proba(source, SPEC)
    assert torch.equal(result.logits, plain.logits)  # exactly predict()'s
    assert torch.equal(result.decoded, plain.classes)
    assert torch.equal(result.class_indices, plain.classes)
    assert torch.allclose(result.probabilities.sum(1), torch.ones(300), atol=1e-6)
    assert torch.allclose(result.probabilities, torch.softmax(plain.logits, dim=1))
    assert result.sample_ids.tolist() == list(range(300))
    assert result.sample_ids.dtype == np.int64
    assert len(result) == 300


def test_decoded_labels_follow_the_spec_label_order():
    logits = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0], [0.0, 0.0, 5.0]])
    result = prediction_from_logits(logits, SPEC)
    assert result.decoded_labels().tolist() == ["dog", "cat", "fox"]
    assert result.decoded_labels().dtype == object
    reversed_spec = ProbabilitySpec("categorical", labels=("fox", "dog", "cat"))
    assert prediction_from_logits(logits, reversed_spec).decoded_labels().tolist() == [
        "dog",
        "fox",
        "cat",
    ]


def test_class_first_outputs_use_class_axis_1():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 3, 5, 6, generator=g)  # (N, C, H, W)
    result = prediction_from_logits(logits, SPEC)
    assert torch.allclose(result.probabilities.sum(dim=1), torch.ones(4, 5, 6), atol=1e-6)
    assert torch.equal(result.decoded, logits.argmax(dim=1))
    assert result.decoded_labels().shape == (4, 5, 6)
    assert result.decoded_labels()[0, 0, 0] == SPEC.labels[int(logits[0, :, 0, 0].argmax())]


def test_bernoulli_is_elementwise_sigmoid_and_refuses_class_indices():
    logits = torch.tensor([[2.0, -1.0], [0.0, -3.0], [-0.5, 4.0]])
    spec = ProbabilitySpec(kind="bernoulli", labels=("spam", "urgent"))
    result = prediction_from_logits(logits, spec)
    assert torch.allclose(result.probabilities, torch.sigmoid(logits))
    assert result.probabilities.sum(1).tolist() != [1.0, 1.0, 1.0]  # not normalized
    assert result.decoded.tolist() == [[1, 0], [1, 0], [0, 1]]  # logit >= 0, as predict()
    assert result.decoded_labels().tolist() == [("spam",), ("spam",), ("urgent",)]
    with pytest.raises(PredictionValidationError, match="0/1 indicators, not class indices"):
        result.class_indices  # noqa: B018


def test_a_bce_model_decodes_as_predict_does():
    model = NNModel(
        net_params=NNParams(input_dim=8, output_dim=1, hidden_dims=[8], dropout_prob=0.0),
        params=NNModelParams(loss=Losses.BINARY_CROSS_ENTROPY),
    )
    X = torch.randn(50, 8)
    result = model.predict_proba(X, ProbabilitySpec("bernoulli"))
    assert torch.equal(result.decoded, model.predict(X).classes)
    assert result.probabilities.shape == (50, 1)


def test_predict_proba_runs_under_the_precision_policy_and_restores_each_modules_mode():
    model = NNModel(
        net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=[16], dropout_prob=0.5),
        params=NNModelParams(precision=PrecisionPolicy("bf16")),
    )
    spy = _ForwardCount(model.net.layers[0])
    model.net.train()
    frozen = model.net.layers[0]
    frozen.eval()  # a deliberate mix: one submodule in eval inside a training network
    X = torch.randn(20, 8)
    first = model.predict_proba(X, SPEC)
    assert spy.dtypes == [torch.bfloat16]  # the policy's autocast covers predict_proba
    assert first.logits.dtype == torch.float32
    assert model.net.training
    assert not frozen.training  # each module's own mode, not one mode for all
    again = model.predict_proba(X, SPEC)
    assert torch.equal(first.logits, again.logits)  # dropout was off: eval inside
    assert "predict_proba" in model.precision.covers()


def test_predict_proba_is_its_own_precision_surface():
    """A policy that covered only predict_proba would autocast it and not predict."""
    from nnx_lab.engine.precision import ResolvedPrecision

    class OnlyPredictProba(ResolvedPrecision):
        def covers(self):
            return ["predict_proba"]

    model = f.model()
    model.precision = OnlyPredictProba("bf16", "bf16", "cpu")
    spy = _ForwardCount(model.net.layers[0])
    X = torch.randn(4, 8)
    model.predict(X)
    model.predict_proba(X, SPEC)
    assert spy.dtypes == [torch.float32, torch.bfloat16]


# -- sample ids and loaders --------------------------------------------------------------------
def test_a_shuffling_loader_warns_that_ids_are_positions():
    model = f.model()
    X, y = torch.randn(64, 8), torch.zeros(64, dtype=torch.long)
    shuffled = DataLoader(TensorDataset(X, y), batch_size=16, shuffle=True)
    with pytest.warns(UserWarning, match="positions in this iteration's order") as caught:
        result = model.predict_proba(shuffled, SPEC)
    assert caught[0].filename == __file__  # points at the caller's line
    assert result.sample_ids.tolist() == list(range(64))
    ordered = DataLoader(TensorDataset(X, y), batch_size=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.predict_proba(ordered, SPEC)
        model.predict_proba(X, SPEC)


def test_prediction_from_logits_takes_sample_ids_and_checks_them():
    logits = torch.randn(3, 3)
    result = prediction_from_logits(logits, SPEC, sample_ids=[10, 20, 30])
    assert result.sample_ids.tolist() == [10, 20, 30]
    with pytest.raises(PredictionValidationError, match="one id per row"):
        prediction_from_logits(logits, SPEC, sample_ids=[1, 2])
    with pytest.raises(PredictionValidationError, match="integer ids"):
        prediction_from_logits(logits, SPEC, sample_ids=[0.5, 1.5, 2.5])


# -- refusals ----------------------------------------------------------------------------------
def test_a_label_count_that_does_not_match_the_class_axis_is_refused_before_inference():
    model = f.model()
    spy = _ForwardCount(model.net.layers[0])
    wrong = ProbabilitySpec("categorical", labels=("cat", "dog"))
    with pytest.raises(PredictionValidationError, match=r"2 labels for a class axis of size 3"):
        model.predict_proba(torch.randn(5, 8), wrong)
    assert spy.calls == 0
    with pytest.raises(PredictionValidationError, match=r"ProbabilitySpec\.labels"):
        prediction_from_logits(torch.randn(5, 4), SPEC)


@pytest.mark.parametrize("axis", [0, 2, -3, 5])
def test_an_invalid_class_axis_is_refused(axis):
    with pytest.raises(PredictionValidationError, match="class_axis") as err:
        prediction_from_logits(torch.randn(5, 3), ProbabilitySpec("categorical", class_axis=axis))
    assert "axis 0 holds the rows" in str(err.value)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_logits_are_refused_naming_the_rows(bad):
    logits = torch.randn(6, 3)
    logits[4, 1] = bad
    with pytest.raises(
        PredictionValidationError, match=r"1 NaN/inf values in 1 rows \(first: row 4\)"
    ):
        prediction_from_logits(logits, SPEC)


def test_without_a_spec_or_a_declared_task_predict_proba_is_refused():
    with pytest.raises(PredictionValidationError, match="declares no task") as err:
        f.model().predict_proba(torch.randn(2, 8))
    assert "never inferred" in str(err.value)


def test_a_declared_task_supplies_the_spec_seam():
    """The seam for declared tasks (§2.5): a task's probability_spec() is used when no
    spec is passed; None means regression (continuous values, no probabilities)."""

    class Declared:
        def __init__(self, spec):
            self.spec = spec

        def probability_spec(self):
            return self.spec

    model = f.model()
    object.__setattr__(model.params, "task", Declared(SPEC))
    X = torch.randn(7, 8)
    assert model.predict_proba(X).spec is SPEC
    object.__setattr__(model.params, "task", Declared(None))
    result = model.predict_proba(X)
    assert result.probabilities is None
    assert result.spec is None
    with pytest.raises(PredictionValidationError, match="continuous values"):
        result.class_indices  # noqa: B018


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"kind": "softmax"}, "ProbabilitySpec.kind"),
        ({"kind": "categorical", "class_axis": 1.0}, "ProbabilitySpec.class_axis"),
        ({"kind": "categorical", "class_axis": True}, "ProbabilitySpec.class_axis"),
        ({"kind": "categorical", "labels": ("a", "a")}, "ProbabilitySpec.labels"),
        ({"kind": "categorical", "labels": ()}, "ProbabilitySpec.labels"),
        ({"kind": "categorical", "labels": "abc"}, "ProbabilitySpec.labels"),
        ({"kind": "categorical", "labels": ("a", 1.5)}, "ProbabilitySpec.labels"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_field(kwargs, field):
    with pytest.raises(PredictionValidationError, match=field.replace(".", r"\.")):
        ProbabilitySpec(**kwargs)


def test_a_categorical_spec_over_one_output_is_refused():
    with pytest.raises(PredictionValidationError, match="declare kind='bernoulli'"):
        prediction_from_logits(torch.randn(4, 1), ProbabilitySpec("categorical"))


def test_predict_proba_refuses_what_is_not_a_spec():
    with pytest.raises(PredictionValidationError, match="not a ProbabilitySpec"):
        f.model().predict_proba(torch.randn(2, 8), "categorical")


def test_decoded_labels_without_labels_is_refused():
    result = prediction_from_logits(torch.randn(2, 3), ProbabilitySpec("categorical"))
    with pytest.raises(PredictionValidationError, match="declare labels"):
        result.decoded_labels()


# -- state -------------------------------------------------------------------------------------
def test_a_spec_round_trips_through_json_with_its_label_order():
    for spec in (
        SPEC,
        ProbabilitySpec("bernoulli", labels=(3, 1, 2)),
        ProbabilitySpec("categorical"),
    ):
        state = json.loads(json.dumps(spec.state()))
        back = ProbabilitySpec.from_state(state)
        assert back == spec
        assert back.labels == spec.labels


@pytest.mark.parametrize(
    "state",
    [
        None,
        {"kind": "categorical", "class_axis": -1, "labels": None},  # no format
        {**SPEC.state(), "version": 99},
        {k: v for k, v in SPEC.state().items() if k != "labels"},
        {**SPEC.state(), "labels": "cat"},
        {**SPEC.state(), "kind": "poisson"},
    ],
)
def test_from_state_refuses_what_state_did_not_write(state):
    with pytest.raises(PredictionValidationError):
        ProbabilitySpec.from_state(state)


def test_predict_proba_result_is_a_prediction_result():
    assert isinstance(f.model().predict_proba(torch.randn(3, 8), SPEC), PredictionResult)


def test_predict_is_unchanged_by_a_bad_input_to_predict_proba():
    model = f.model()
    with pytest.raises(ConfigError, match="features must have 8 columns"):
        model.predict_proba(torch.randn(3, 5), SPEC)
