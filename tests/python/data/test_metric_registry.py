"""The metric registry and StreamingMetrics: hand-computed values, the device contract
(no host sync in update), merges in any order, and every refusal."""

from __future__ import annotations

import contextlib
import itertools
import math
import random

import pytest
import torch

from nnx_lab import ConfigError, DataError, MetricSpec, ProbabilitySpec, StreamingMetrics
from nnx_lab.data import (
    DIRECTIONS,
    INPUTS,
    MetricDef,
    metric_info,
    metric_names,
    register_metric,
)

LABEL_METRICS = [
    "accuracy",
    "error",
    "precision",
    "recall",
    "f1",
    "precision_micro",
    "recall_micro",
    "f1_micro",
    "f1_weighted",
]


def _metrics(names, kind="categorical", **kw):
    return StreamingMetrics([MetricSpec(n) for n in names], kind, **kw)


def _one_hot_logits(pred, k, scale=5.0):
    return torch.nn.functional.one_hot(torch.as_tensor(pred), k).double() * scale


# -- hand-computed values ----------------------------------------------------------------------
def test_label_metrics_on_a_hand_computed_confusion_matrix():
    # truth  0 0 1 1 2 2 ; predicted 0 1 1 1 2 0
    # per class: tp 1 2 1, support 2 2 2, predicted 2 3 1
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    m = _metrics(LABEL_METRICS)
    m.update(
        y, decoded=torch.tensor([0, 1, 1, 1, 2, 0]), logits=_one_hot_logits([0, 1, 1, 1, 2, 0], 3)
    )
    v = m.finalize().values
    precision = [1 / 2, 2 / 3, 1]
    recall = [1 / 2, 1, 1 / 2]
    f1 = [2 * p * r / (p + r) for p, r in zip(precision, recall, strict=True)]
    assert v["accuracy"] == pytest.approx(4 / 6)
    assert v["error"] == pytest.approx(2 / 6)
    assert v["precision"] == pytest.approx(sum(precision) / 3)
    assert v["recall"] == pytest.approx(sum(recall) / 3)
    assert v["f1"] == pytest.approx(sum(f1) / 3)
    assert v["f1_weighted"] == pytest.approx(sum(2 * x for x in f1) / 6)
    for micro in ("precision_micro", "recall_micro", "f1_micro"):
        assert v[micro] == pytest.approx(4 / 6)  # single-label: micro = accuracy


def test_weighted_f1_weights_each_class_by_its_targets():
    # truth 0 0 0 1 ; predicted 0 0 1 1: class 0 f1 = 2*1*(2/3)/(5/3) = 0.8, class 1 = 2/3
    m = _metrics(["f1", "f1_weighted"])
    m.update(torch.tensor([0, 0, 0, 1]), logits=_one_hot_logits([0, 0, 1, 1], 2))
    v = m.finalize().values
    assert v["f1_weighted"] == pytest.approx((3 * 0.8 + 1 * 2 / 3) / 4)
    assert v["f1"] == pytest.approx((0.8 + 2 / 3) / 2)


def test_bernoulli_nll_and_brier_by_hand():
    logits = torch.tensor([[2.0, -1.0], [0.5, 3.0]], dtype=torch.float64)
    y = torch.tensor([[1.0, 1.0], [0.0, float("nan")]])  # the NaN element is left out
    m = _metrics(["nll", "brier"], "bernoulli")
    m.update(y, logits=logits)
    p = torch.sigmoid(logits)
    nll = (-math.log(p[0, 0]) - math.log(p[0, 1]) - math.log(1 - p[1, 0])) / 3
    brier = ((1 - p[0, 0]) ** 2 + (1 - p[0, 1]) ** 2 + p[1, 0] ** 2) / 3
    result = m.finalize()
    assert result.values["nll"] == pytest.approx(nll)
    assert result.values["brier"] == pytest.approx(float(brier))
    assert result.valid == 3


def test_macro_averages_skip_classes_absent_from_targets_and_predictions():
    y = torch.tensor([0, 0, 1])
    m = _metrics(["precision", "recall", "f1"])
    m.update(y, logits=_one_hot_logits([0, 1, 1], 4))  # classes 2 and 3 never occur
    v = m.finalize().values
    assert v["precision"] == pytest.approx((1 + 0.5) / 2)
    assert v["recall"] == pytest.approx((0.5 + 1) / 2)


def test_nll_and_brier_by_hand_from_probabilities():
    p = torch.tensor([[0.5, 0.5], [0.25, 0.75]], dtype=torch.float64)
    m = _metrics(["nll", "brier"])
    m.update(torch.tensor([0, 1]), probabilities=p)
    v = m.finalize().values
    assert v["nll"] == pytest.approx((-math.log(0.5) - math.log(0.75)) / 2)
    # row 1: (0.5-1)^2 + 0.5^2 = 0.5; row 2: 0.25^2 + (0.75-1)^2 = 0.125
    assert v["brier"] == pytest.approx((0.5 + 0.125) / 2)


def test_nll_from_logits_is_exact_where_float32_probabilities_saturate():
    logits = torch.tensor([[0.0, 200.0]])  # p(class 0) underflows to 0 in float32
    from_probs = _metrics(["nll"])
    from_probs.update(torch.tensor([0]), probabilities=torch.softmax(logits, 1))
    assert from_probs.finalize().values["nll"] == math.inf
    from_logits = _metrics(["nll"])
    from_logits.update(torch.tensor([0]), logits=logits)
    assert from_logits.finalize().values["nll"] == pytest.approx(200.0)


def test_ece_on_a_hand_computed_example():
    # bin 15: .95 right, .95 wrong (over-confident); bin 9: .55 right, wrong, wrong
    # (over-confident); bin 10: .65 right, right (under-confident)
    p1 = torch.tensor([0.95, 0.95, 0.55, 0.55, 0.55, 0.65, 0.65], dtype=torch.float64)
    probs = torch.stack([1 - p1, p1], 1)
    y = torch.tensor([1, 0, 1, 0, 0, 1, 1])
    m = _metrics(["ece"])
    m.update(y, probabilities=probs)
    expected = (2 / 7) * abs(0.5 - 0.95) + (3 / 7) * abs(1 / 3 - 0.55) + (2 / 7) * abs(1.0 - 0.65)
    assert m.finalize().values["ece"] == pytest.approx(expected)
    coarse = StreamingMetrics([MetricSpec("ece", bins=2)], "categorical")
    coarse.update(y, probabilities=probs)  # one bin (0.5, 1]: accuracy 4/7, confidence 4.85/7
    assert coarse.finalize().values["ece(bins=2)"] == pytest.approx(abs(4 / 7 - 4.85 / 7))


def test_a_confidence_on_a_bin_edge_falls_in_the_lower_bin():
    """Guo et al.: bin m holds ((m-1)/M, m/M]; 0.6 = 9/15 is the top of bin 9."""
    m = StreamingMetrics([MetricSpec("ece")], "categorical")
    m.update(torch.tensor([0]), probabilities=torch.tensor([[0.6, 0.4]], dtype=torch.float64))
    counts = m.statistic("reliability", bins=15)["count"].tolist()
    assert counts[8] == 1
    assert sum(counts) == 1


def test_auroc_by_hand_with_ties():
    # positives 0.5 and 0.9; negatives 0.2, 0.5, 0.5: 2 + 3 wins (ties count 1/2) of 6
    scores = torch.tensor([[0.2], [0.5], [0.5], [0.5], [0.9]], dtype=torch.float64)
    y = torch.tensor([[0.0], [0.0], [1.0], [0.0], [1.0]])
    m = _metrics(["auroc"], "bernoulli")
    m.update(y, probabilities=scores)
    assert m.finalize().values["auroc"] == pytest.approx(5 / 6)


def _pairwise_auroc(score, positive):
    pos = [s for s, p in zip(score, positive, strict=True) if p]
    neg = [s for s, p in zip(score, positive, strict=True) if not p]
    wins = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
    return wins / (len(pos) * len(neg))


def test_categorical_auroc_is_one_vs_rest_macro_and_exact():
    g = torch.Generator().manual_seed(3)
    rows = torch.randn(20, 4, generator=g)
    logits = rows[torch.randint(0, 20, (60,), generator=g)]  # repeated rows: exact ties
    y = torch.randint(0, 4, (60,), generator=g)
    m = _metrics(["auroc"])
    m.update(y, logits=logits)
    logp = torch.log_softmax(logits.double(), 1)
    per_class = [_pairwise_auroc(logp[:, c].tolist(), (y == c).tolist()) for c in range(4)]
    assert m.finalize().values["auroc"] == pytest.approx(sum(per_class) / 4, abs=1e-15)


def test_auroc_ranks_by_log_probabilities_where_probabilities_tie_at_one():
    logits = torch.tensor([[0.0, 120.0], [0.0, 130.0], [0.0, 140.0]])  # float32 p: 0 and 1
    y = torch.tensor([0, 1, 1])
    tied = _metrics(["auroc"])
    tied.update(y, probabilities=torch.softmax(logits, 1))
    assert tied.finalize().values["auroc"] == pytest.approx(0.5)  # every score ties
    exact = _metrics(["auroc"])
    exact.update(y, logits=logits)
    assert exact.finalize().values["auroc"] == pytest.approx(1.0)


def test_bernoulli_label_metrics_per_output_and_pooled():
    y = torch.tensor([[1, 0], [1, 1], [0, 0], [0, 1]], dtype=torch.float32)
    pred = torch.tensor([[1, 0], [0, 1], [1, 0], [0, 0]])
    m = _metrics(
        ["accuracy", "precision", "recall", "f1", "precision_micro", "recall_micro"], "bernoulli"
    )
    m.update(y, logits=pred.double() * 2 - 1)  # logit >= 0 decodes to 1
    v = m.finalize().values
    # output 0: tp 1, fp 1, fn 1 -> p 1/2, r 1/2; output 1: tp 1, fp 0, fn 1 -> p 1, r 1/2
    assert v["accuracy"] == pytest.approx(5 / 8)
    assert v["precision"] == pytest.approx((0.5 + 1) / 2)
    assert v["recall"] == pytest.approx(0.5)
    assert v["precision_micro"] == pytest.approx(2 / 3)
    assert v["recall_micro"] == pytest.approx(2 / 4)


def test_regression_masks_nan_targets_out_of_every_metric():
    m = _metrics(["mse", "mae"], "regression")
    m.update(torch.tensor([1.5, float("nan"), 1.0]), values=torch.tensor([1.0, 2.0, 3.0]))
    result = m.finalize()
    assert result.values["mse"] == pytest.approx((0.25 + 4) / 2)
    assert result.values["mae"] == pytest.approx((0.5 + 2) / 2)
    assert (result.rows, result.valid) == (3, 2)


def test_ignore_index_targets_count_in_no_metric():
    y = torch.tensor([0, -100, 1, -100])
    logits = _one_hot_logits([0, 1, 0, 0], 2)
    m = _metrics(["accuracy", "nll"])
    m.update(y, logits=logits)
    result = m.finalize()
    assert result.values["accuracy"] == pytest.approx(1 / 2)
    assert result.valid == 2
    none = _metrics(["accuracy", "nll", "auroc"])
    none.update(torch.tensor([-100, -100]), logits=logits[:2])
    assert none.finalize().values == {"accuracy": None, "nll": None, "auroc": None}  # not 0


def test_undefined_values_are_none_not_fabricated():
    m = _metrics(["auroc", "accuracy"])
    m.update(torch.tensor([1, 1]), logits=torch.randn(2, 2))  # no negative for either class
    assert m.finalize().values["auroc"] is None
    assert _metrics(["nll"]).finalize().values == {"nll": None}  # nothing seen


def test_a_prediction_result_and_a_class_axis_from_the_spec():
    spec = ProbabilitySpec("categorical", class_axis=1, labels=("a", "b", "c"))
    logits = torch.randn(4, 3, 5)
    y = torch.randint(0, 3, (4, 5))
    from nnx_lab import prediction_from_logits

    via_spec = StreamingMetrics([MetricSpec("nll"), MetricSpec("accuracy")], spec)
    via_spec.update(y, prediction=prediction_from_logits(logits, spec))
    flat = _metrics(["nll", "accuracy"])
    flat.update(y.reshape(-1), logits=logits.movedim(1, -1).reshape(-1, 3))
    assert via_spec.finalize().values == pytest.approx(flat.finalize().values)


# -- the device contract -----------------------------------------------------------------------
@contextlib.contextmanager
def _no_host_sync():
    """Every way a tensor reaches the host raises inside the block: the read-backs, and
    the ops whose output size depends on the data (a sync on CUDA, silent on the CPU)."""
    names = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__")
    saved = {n: getattr(torch.Tensor, n) for n in (*names, "__getitem__", "nonzero")}
    saved_fns = {n: getattr(torch, n) for n in ("bincount", "nonzero", "masked_select", "unique")}
    getitem = torch.Tensor.__getitem__

    def refuse(name):
        def fn(*a, **k):
            raise AssertionError(f"host sync: {name}")

        return fn

    def checked_getitem(self, index):
        parts = index if isinstance(index, tuple) else (index,)
        if any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts):
            raise AssertionError("host sync: boolean-mask indexing")
        return getitem(self, index)

    try:
        for n in (*names, "nonzero"):
            setattr(torch.Tensor, n, refuse(f"Tensor.{n}"))
        torch.Tensor.__getitem__ = checked_getitem
        for n in saved_fns:
            setattr(torch, n, refuse(f"torch.{n}"))
        yield
    finally:
        for n, fn in saved.items():
            setattr(torch.Tensor, n, fn)
        for n, fn in saved_fns.items():
            setattr(torch, n, fn)


@pytest.mark.parametrize(
    ("kind", "names"),
    [
        ("categorical", metric_names("categorical")),
        ("bernoulli", metric_names("bernoulli")),
        ("regression", metric_names("regression")),
    ],
)
def test_update_and_merge_never_read_back_to_the_host(kind, names):
    g = torch.Generator().manual_seed(0)
    if kind == "categorical":
        batch = {"logits": torch.randn(32, 5, generator=g)}
        y = torch.randint(0, 5, (32,), generator=g)
    elif kind == "bernoulli":
        batch = {"logits": torch.randn(32, 3, generator=g)}
        y = torch.randint(0, 2, (32, 3), generator=g).float()
    else:
        batch = {"values": torch.randn(32, 2, generator=g)}
        y = torch.randn(32, 2, generator=g)
    a, b = _metrics(names, kind), _metrics(names, kind)
    with _no_host_sync():
        for _ in range(3):
            a.update(y, **batch)
            b.update(y, **batch)
        merged = a.merge(b)
    assert merged.finalize().valid == 6 * y.numel()


@pytest.mark.parametrize(
    "read_back",
    [
        lambda t: t.sum().item(),
        lambda t: t[t > 0],
        lambda t: torch.bincount(t.long()),
        lambda t: bool(t.any()),
        lambda t: t.nonzero(),
    ],
)
def test_the_sync_guard_itself_catches_a_read_back(read_back):
    with _no_host_sync(), pytest.raises(AssertionError, match="host sync"):
        read_back(torch.ones(2))
    assert torch.ones(2)[torch.tensor([True, False])].tolist() == [1.0]  # restored after


# -- merge -------------------------------------------------------------------------------------
def _shards(n_shards=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(500, 4, generator=g).round(decimals=1)  # ties for AUROC
    y = torch.randint(0, 4, (500,), generator=g)
    y[::17] = -100
    cuts = sorted(random.Random(seed).sample(range(1, 500), n_shards - 1))
    bounds = list(zip([0, *cuts], [*cuts, 500], strict=True))
    return logits, y, bounds


def test_merging_shards_in_any_order_equals_the_one_shot_metrics():
    names = metric_names("categorical")
    logits, y, bounds = _shards()
    one = _metrics(names)
    one.update(y, logits=logits)
    expected = one.finalize()
    shards = []
    for lo, hi in bounds:
        m = _metrics(names)
        m.update(y[lo:hi], logits=logits[lo:hi])
        shards.append(m)
    orders = list(itertools.permutations(range(len(shards))))
    for order in random.Random(1).sample(orders, 12):
        total = shards[order[0]]
        for i in order[1:]:
            total = total.merge(shards[i])
        got = total.finalize()
        assert (got.rows, got.valid) == (expected.rows, expected.valid)
        for name in names:
            if name in ("nll", "brier", "ece"):  # float sums: equal to the last rounding
                assert got.values[name] == pytest.approx(expected.values[name], rel=1e-12)
            else:  # counts (and AUROC's integer rank sums): exactly
                assert got.values[name] == expected.values[name], name
    # a tree of merges too, and the inputs are left as they were
    left = shards[0].merge(shards[1]).merge(shards[2])
    right = shards[3].merge(shards[4].merge(shards[5].merge(shards[6])))
    assert right.merge(left).finalize().values == pytest.approx(expected.values, rel=1e-12)
    assert shards[0].finalize().rows == bounds[0][1] - bounds[0][0]


def test_merge_refuses_different_declarations():
    base = _metrics(["nll", "accuracy"])
    base.update(torch.tensor([0, 1]), logits=torch.randn(2, 3))
    others = [
        _metrics(["nll"]),
        _metrics(["accuracy", "nll"]),
        _metrics(["nll", "accuracy"], ignore_index=None),
        StreamingMetrics([MetricSpec("nll"), MetricSpec("accuracy")], "bernoulli"),
        StreamingMetrics([MetricSpec("nll"), MetricSpec("accuracy")], "categorical", class_axis=1),
    ]
    for other in others:
        with pytest.raises(ConfigError, match=r"StreamingMetrics\.merge"):
            base.merge(other)
    wider = _metrics(["nll", "accuracy"])
    wider.update(torch.tensor([0]), logits=torch.randn(1, 4))
    with pytest.raises(ConfigError, match="same classes"):
        base.merge(wider)
    with pytest.raises(ConfigError, match="another StreamingMetrics"):
        base.merge({"nll": 1.0})


# -- refusals ----------------------------------------------------------------------------------
def test_unknown_metric_and_option_names_are_refused_with_the_spelling_fix():
    with pytest.raises(ConfigError, match="check the spelling; registered metrics: accuracy"):
        MetricSpec("acuracy")
    with pytest.raises(ConfigError, match="ece takes bins"):
        MetricSpec("ece", bin=10)
    with pytest.raises(ConfigError, match="bins"):
        MetricSpec("ece", bins=0)


def test_declarations_are_checked_when_built():
    with pytest.raises(ConfigError, match="mse applies to regression"):
        _metrics(["mse"], "categorical")
    with pytest.raises(ConfigError, match="declare each metric once"):
        _metrics(["nll", "nll"])
    with pytest.raises(ConfigError, match=r"StreamingMetrics\.kind"):
        _metrics(["nll"], "poisson")
    with pytest.raises(ConfigError, match="a list of MetricSpec"):
        StreamingMetrics(MetricSpec("nll"), "categorical")


def test_update_refuses_missing_or_misshapen_inputs_before_adding_anything():
    m = _metrics(["nll", "accuracy"])
    with pytest.raises(DataError, match="nll need probabilities"):
        m.update(torch.tensor([0, 1]), decoded=torch.tensor([0, 1]))
    with pytest.raises(DataError, match="one class index per row"):
        m.update(torch.tensor([0, 1, 1]), logits=torch.randn(2, 3))
    with pytest.raises(DataError, match="integer class indices"):
        m.update(torch.tensor([0.0, 1.0]), logits=torch.randn(2, 3))
    assert m.finalize().rows == 0  # nothing was added by the refused calls
    m.update(torch.tensor([0, 1]), logits=torch.randn(2, 3))
    with pytest.raises(DataError, match="keep the class axis the same size"):
        m.update(torch.tensor([0, 1]), logits=torch.randn(2, 4))


def test_bad_targets_and_non_finite_inputs_are_counted_and_reported_by_finalize():
    m = _metrics(["accuracy"])
    m.update(torch.tensor([0, 7, 1]), logits=torch.randn(3, 3))
    with pytest.raises(DataError, match=r"1 targets were not class indices in \[0, 3\)"):
        m.finalize()
    b = _metrics(["accuracy"], "bernoulli")
    b.update(torch.tensor([[0.0], [0.5]]), logits=torch.randn(2, 1))
    with pytest.raises(DataError, match="not 0 or 1"):
        b.finalize()
    n = _metrics(["nll"])
    n.update(torch.tensor([0, 1]), logits=torch.tensor([[0.0, float("nan")], [1.0, 0.0]]))
    with pytest.raises(DataError, match="1 predicted values were NaN/inf"):
        n.finalize()


# -- the registry ------------------------------------------------------------------------------
def test_every_registered_metric_declares_its_input_and_direction():
    assert set(metric_names()) >= {
        "nll",
        "brier",
        "accuracy",
        "error",
        "f1",
        "f1_micro",
        "f1_weighted",
        "precision",
        "recall",
        "mse",
        "mae",
        "auroc",
        "ece",
    }
    for name in metric_names():
        info = metric_info(name)
        assert info.input in INPUTS
        assert info.direction in DIRECTIONS
    assert metric_info("nll").direction == "lower"
    assert metric_info("auroc").direction == "higher"
    assert metric_info("accuracy").input == "labels"
    assert metric_info("brier").input == "probabilities"
    assert metric_info("mae").input == "values"


def test_a_registered_metric_reads_a_shared_statistic():
    def positive_rate(t, ctx):
        conf = t["confusion"][:-1].view(ctx.n_classes, ctx.n_classes)
        return conf[:, 1].sum() / conf.sum()

    name = "test_predicted_class_1_rate"
    register_metric(
        MetricDef(name, "labels", "higher", ("categorical",), "confusion", positive_rate, "test")
    )
    m = StreamingMetrics([MetricSpec(name), MetricSpec("accuracy")], "categorical")
    m.update(torch.tensor([0, 1, 1, 0]), logits=_one_hot_logits([1, 1, 0, 1], 2))
    assert m.finalize().values[name] == pytest.approx(3 / 4)
    with pytest.raises(ConfigError, match="that metric is registered"):
        register_metric(
            MetricDef(name, "labels", "higher", ("categorical",), "confusion", positive_rate, "x")
        )
    with pytest.raises(ConfigError, match="register the statistic first"):
        register_metric(
            MetricDef("x2", "labels", "higher", ("categorical",), "nope", positive_rate, "x")
        )
    with pytest.raises(ConfigError, match=r"MetricDef\.direction"):
        MetricDef("x3", "labels", "up", ("categorical",), "confusion", positive_rate, "x")


def test_metric_spec_is_a_value_with_a_json_state():
    spec = MetricSpec("ece", bins=10)
    assert spec == MetricSpec.from_state(spec.state())
    assert hash(spec) == hash(MetricSpec("ece", bins=10))
    assert spec.key == "ece(bins=10)"
    assert MetricSpec("ece", bins=15).key == "ece"  # the default is left out
    assert repr(MetricSpec("nll")) == "MetricSpec('nll')"
    with pytest.raises(AttributeError):
        spec.name = "nll"
