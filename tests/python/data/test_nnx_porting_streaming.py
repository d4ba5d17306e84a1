"""Issue 29: NNx's ``StreamingMetrics`` methods: ``update(target, *, probabilities=,
labels=, values=, valid=) -> count``, ``update_logits``, ``for_task`` and the
``MetricSnapshot`` that ``finalize`` returns."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nnx_lab import DataError, MetricSpec, TaskSpec
from nnx_lab.streaming import MetricSnapshot, StreamingMetrics

LOGITS = torch.tensor([[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
Y = torch.tensor([0, 1, 0, 2])


def _accuracy_on(rows):
    return float((LOGITS[rows].argmax(1) == Y[rows]).double().mean())


def test_update_returns_the_count_and_valid_leaves_entries_out():
    m = StreamingMetrics([MetricSpec("accuracy"), MetricSpec("nll")], semantics="categorical")
    probs = torch.softmax(LOGITS, 1)
    count = m.update(Y, probabilities=probs)
    assert count == 4
    assert int(count) + 1 == 5
    assert [0, 1, 2, 3, 4][count] == 4  # an index, read from the device when used
    masked = StreamingMetrics([MetricSpec("accuracy")], semantics="categorical")
    keep = torch.tensor([True, True, False, True])
    assert masked.update(Y, probabilities=probs, valid=keep) == 3
    snap = masked.finalize()
    assert isinstance(snap, MetricSnapshot)
    assert snap.count == 3
    assert snap.values["accuracy"] == pytest.approx(_accuracy_on([0, 1, 3]))
    assert snap.unavailable == ()
    # valid and ignore_index both leave rows out
    y = Y.clone()
    y[0] = -100
    both = StreamingMetrics([MetricSpec("accuracy")], semantics="categorical")
    assert both.update(y, probabilities=probs, valid=keep) == 2
    assert both.finalize()["accuracy"] == pytest.approx(_accuracy_on([1, 3]))


def test_update_takes_decoded_labels_and_values_as_nnx_names_them():
    # decoded labels alone do not say the class count: the task does
    m = StreamingMetrics.for_task([MetricSpec("accuracy")], TaskSpec.categorical(3))
    assert m.update(Y.numpy(), labels=np.array([0, 1, 1, 2])) == 4
    assert m.finalize()["accuracy"] == pytest.approx(0.75)
    with pytest.raises(Exception, match="labels"):
        m.update(Y, labels=Y, decoded=Y)
    r = StreamingMetrics([MetricSpec("mae")], semantics="continuous")
    target = torch.tensor([1.0, 2.0, 3.0])
    assert r.update(target, values=torch.tensor([1.5, 2.0, 0.0]), valid=target < 3) == 2
    assert r.finalize()["mae"] == pytest.approx(0.25)


def test_update_logits_and_for_task_read_a_models_outputs():
    task = TaskSpec.categorical(3, ignore_index=-1)
    m = StreamingMetrics.for_task([MetricSpec("accuracy"), MetricSpec("nll")], task)
    assert (m.kind, m.ignore_index, m.n_classes) == ("categorical", -1, 3)
    y = Y.clone()
    y[2] = -1
    assert m.update_logits(y, LOGITS) == 3
    snap = m.finalize()
    assert snap["accuracy"] == pytest.approx(_accuracy_on([0, 1, 3]))
    nll = torch.nn.functional.cross_entropy(LOGITS[[0, 1, 3]], Y[[0, 1, 3]])
    assert snap["nll"] == pytest.approx(float(nll), rel=1e-6)
    assert StreamingMetrics.for_task([MetricSpec("mae")], TaskSpec.regression()).kind == (
        "regression"
    )
    with pytest.raises(Exception, match="TaskSpec"):
        StreamingMetrics.for_task([MetricSpec("accuracy")], "categorical")


def test_an_empty_stream_has_every_metric_unavailable():
    snap = StreamingMetrics([MetricSpec("accuracy")], semantics="categorical").finalize()
    assert (snap.count, snap.unavailable) == (0, ("accuracy",))


@pytest.mark.parametrize(
    "valid", [torch.tensor([1, 1, 0, 1]), torch.tensor([True, False]), [True] * 3]
)
def test_a_valid_mask_of_another_shape_or_dtype_is_refused(valid):
    m = StreamingMetrics([MetricSpec("accuracy")], semantics="categorical")
    with pytest.raises(DataError, match="valid"):
        m.update(Y, probabilities=torch.softmax(LOGITS, 1), valid=valid)
    assert m.finalize().count == 0  # refused before anything was added
