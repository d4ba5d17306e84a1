"""interpret(): the confusion matrix, cells, top losses (raw, calibrated, declined), the
regression residuals, one streamed pass over any batching, and the refusals."""

from __future__ import annotations

import engine_factories as f
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.metrics import confusion_matrix
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import Checkpoints, Losses, NNCheckpoint, NNModel, ProbabilitySpec
from nnx_lab.abstention import AbstentionPolicy
from nnx_lab.calibration import TemperatureCalibrator, model_fingerprint
from nnx_lab.errors import ConfigError, DataError
from nnx_lab.interpretation import interpret

LABELS = ("a", "b", "c")


@pytest.fixture(scope="module")
def classifier():
    torch.manual_seed(0)
    model = f.model(net={"dropout_prob": 0.0})
    _X, _y, Xv, yv = f.data(n_train=96, n_val=90)
    return model, Xv, yv


def loader(X, y, batch):
    return DataLoader(TensorDataset(X, y), batch_size=batch)


def test_the_confusion_matrix_is_sklearns_and_each_cell_lists_its_samples(classifier):
    model, X, y = classifier
    result = interpret(model, loader(X, y, 16), samples_per_cell=1000)
    pred = model.predict(X).classes.numpy()
    expected = confusion_matrix(y.numpy(), pred, labels=[0, 1, 2])
    np.testing.assert_array_equal(result.confusion, expected)
    np.testing.assert_allclose(
        result.confusion_normalized, expected / expected.sum(axis=1, keepdims=True)
    )
    for t in range(3):
        for p in range(3):
            where = np.flatnonzero((y.numpy() == t) & (pred == p))
            got = result.cell_ids.get((t, p), np.zeros(0, int))
            np.testing.assert_array_equal(np.sort(got), where)
            assert [m.sample_id for m in result.samples(t, p)] == list(where)
    assert result.rows == len(y)
    assert result.task == "classification"
    assert result.metrics["accuracy"] == pytest.approx(float((pred == y.numpy()).mean()))


def test_top_losses_are_the_hand_computed_cross_entropies(classifier):
    model, X, y = classifier
    result = interpret(model, loader(X, y, 16), top_k=7)
    logits = model.predict(X).logits
    losses = F.cross_entropy(logits, y, reduction="none").numpy()
    order = sorted(range(len(y)), key=lambda i: (-losses[i], i))[:7]
    assert [m.sample_id for m in result.top_losses] == order
    probs = logits.softmax(1).numpy()
    for m in result.top_losses:
        i = m.sample_id
        assert m.target == int(y[i])
        assert m.prediction == int(probs[i].argmax())
        assert m.loss == pytest.approx(float(losses[i]), rel=1e-5)
        assert m.probability == pytest.approx(float(probs[i].max()), rel=1e-5)
        assert m.true_probability == pytest.approx(float(probs[i, y[i]]), rel=1e-5)
        assert m.declined is None
        assert m.display == {"kind": "table", "names": [f"x{j}" for j in range(8)],
                             "values": pytest.approx(X[i].tolist(), abs=1e-5)}  # fmt: skip


def test_calibrated_probabilities_and_abstention_flags_are_the_tools_own(classifier):
    model, X, y = classifier
    mid = model_fingerprint(model)
    cal = TemperatureCalibrator(2.5, LABELS, mid, "cal")
    spec = ProbabilitySpec("categorical", labels=LABELS)
    calibrated = cal.transform(model.predict_proba(X, spec), model_id=mid)
    probs = calibrated.calibrated_probabilities.numpy()
    policy = AbstentionPolicy(
        "max_probability", float(np.median(probs.max(1))), LABELS, mid, "val",
        input_field="calibrated_probabilities", temperature=2.5,
    )  # fmt: skip
    result = interpret(model, loader(X, y, 16), calibrator=cal, policy=policy, top_k=90)
    accepted = policy.apply(calibrated, model_id=mid).accepted
    probs = calibrated.calibrated_probabilities.numpy()
    assert len(result.top_losses) == 90
    assert result.labels == LABELS
    assert result.calibrated
    assert result.temperature == 2.5
    flags = {m.sample_id: m.declined for m in result.top_losses}
    assert flags == {i: not bool(accepted[i]) for i in range(90)}
    assert 0 < sum(flags.values()) < 90  # both kinds of rows are there
    for m in result.top_losses:
        assert m.probability == pytest.approx(float(probs[m.sample_id].max()), rel=1e-5)
        assert m.true_probability == pytest.approx(float(probs[m.sample_id, m.target]), rel=1e-5)


def test_a_calibrator_of_another_model_is_refused(classifier):
    model, X, y = classifier
    cal = TemperatureCalibrator(2.0, LABELS, "someone-else", "cal")
    with pytest.raises(ConfigError, match="model_id"):
        interpret(model, loader(X, y, 16), calibrator=cal)


@pytest.mark.parametrize("batch", [1, 7, 90])
def test_streaming_in_any_batches_gives_the_one_batch_result(classifier, batch):
    model, X, y = classifier
    whole = interpret(model, (X, y), top_k=11, samples_per_cell=5)
    part = interpret(model, loader(X, y, batch), top_k=11, samples_per_cell=5)
    np.testing.assert_array_equal(part.confusion, whole.confusion)
    assert part.cell_ids.keys() == whole.cell_ids.keys()
    for cell, ids in whole.cell_ids.items():
        np.testing.assert_array_equal(part.cell_ids[cell], ids)
        assert [m.sample_id for m in part.samples(*cell)] == [
            m.sample_id for m in whole.samples(*cell)
        ]
    # float32 matmuls round by batch shape: the same rows, the losses to the last bits
    assert [m.sample_id for m in part.top_losses] == [m.sample_id for m in whole.top_losses]
    for a, b in zip(part.top_losses, whole.top_losses, strict=True):
        assert a.loss == pytest.approx(b.loss, rel=1e-5)
        assert (a.target, a.prediction, a.display) == (b.target, b.prediction, b.display)
    assert part.metrics == pytest.approx(whole.metrics, rel=1e-5)


def test_a_run_is_read_at_its_best_checkpoint(tmp_path, classifier):
    _, X, y = classifier
    root = tmp_path / "runs"
    model = f.model()
    run = model.train(f.train_params(root, n_epochs=3, checkpoint_every_s=0))
    result = interpret(run, loader(X, y, 32), runs_root=root)
    best = NNModel.from_checkpoint(NNCheckpoint.load(run, Checkpoints.BEST, root))
    expected = confusion_matrix(y.numpy(), best.predict(X).classes.numpy(), labels=[0, 1, 2])
    np.testing.assert_array_equal(result.confusion, expected)
    ckpt = NNCheckpoint.load(run, Checkpoints.BEST, root)
    assert result.source == {"kind": "run", "run_id": run.id, "checkpoint": "best",
                             "epoch": ckpt.epoch, "step": ckpt.step}  # fmt: skip
    by_id = interpret(run.id, loader(X, y, 32), runs_root=root)
    assert by_id.to_json() == result.to_json()


def test_regression_residuals_and_largest_errors():
    torch.manual_seed(0)
    model = f.model(net={"output_dim": 1, "dropout_prob": 0.0}, loss=Losses.MEAN_SQUARED_ERROR)
    g = torch.Generator().manual_seed(1)
    X, y = torch.randn(50, 8, generator=g), torch.randn(50, generator=g)
    result = interpret(model, loader(X, y, 8), top_k=5)
    pred = model.predict(X).classes.reshape(-1)
    np.testing.assert_allclose(result.residuals, (pred - y).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(result.sample_ids, np.arange(50))
    err = (pred - y).abs().numpy()
    assert [m.sample_id for m in result.largest_errors] == list(np.argsort(-err)[:5])
    assert result.largest_errors[0].loss == pytest.approx(float(err.max()), rel=1e-6)
    assert result.metrics["mae"] == pytest.approx(float(err.mean()), rel=1e-5)
    payload = result.to_json(max_points=10)
    assert payload["points"]["total"] == 50
    assert len(payload["points"]["targets"]) == 10
    with pytest.raises(ConfigError, match=r"interpret\.calibrator"):
        interpret(model, loader(X, y, 8), calibrator=TemperatureCalibrator(2.0, LABELS, "m", "c"))


def test_images_and_tokens_are_shown_as_such():
    torch.manual_seed(0)
    from nnx_lab import Nets, NNConvParams, NNModelParams

    cnn = NNModel(NNConvParams(output_dim=3, image_size=8, conv_channels=[4], hidden_dims=[8]),
                  NNModelParams(net=Nets.CONV, loss=Losses.CROSS_ENTROPY))  # fmt: skip
    X, y = torch.rand(12, 1, 8, 8), torch.randint(0, 3, (12,))
    result = interpret(cnn, loader(X, y, 5), top_k=2)
    shown = result.top_losses[0].display
    assert result.show == "image"
    assert shown["kind"] == "image"
    assert shown["shape"] == [1, 8, 8]
    assert shown["values"] == pytest.approx(
        X[result.top_losses[0].sample_id].reshape(-1).tolist(), abs=1e-5
    )

    class Bag(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.EmbeddingBag(10, 3)

        def forward(self, ids):
            return self.emb(ids.long())

    model = NNModel(module=Bag(), params=NNModelParams(loss=Losses.CROSS_ENTROPY))
    tokens, t = torch.randint(0, 10, (6, 4)), torch.randint(0, 3, (6,))
    model.predict(tokens[:1])  # an own module's output width is read from a first batch
    words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    result = interpret(
        model, loader(tokens, t, 4), decode=lambda ids: " ".join(words[i] for i in ids)
    )
    shown = result.top_losses[0].display
    ids = tokens[result.top_losses[0].sample_id].tolist()
    assert shown == {"kind": "tokens", "ids": ids, "text": " ".join(words[i] for i in ids)}


class Untouchable:
    """A loader that must not be read: refusals come before any batch."""

    def __iter__(self):
        raise AssertionError("the loader was read before the arguments were checked")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"top_k": 0}, "interpret.top_k"),
        ({"samples_per_cell": -1}, "interpret.samples_per_cell"),
        ({"split": ""}, "interpret.split"),
        ({"calibrator": 2.0}, "interpret.calibrator"),
        ({"policy": "p"}, "interpret.policy"),
        ({"show": "video"}, "interpret.show"),
        ({"labels": ("a", "b")}, "interpret.labels"),
        ({"feature_names": "abc"}, "interpret.feature_names"),
    ],
)
def test_bad_arguments_are_refused_before_the_loader_is_read(classifier, kwargs, field):
    model, _, _ = classifier
    with pytest.raises(ConfigError, match=field):
        interpret(model, Untouchable(), **kwargs)


def test_what_is_not_a_model_or_a_batch_without_targets_is_refused(classifier, tmp_path):
    model, X, _ = classifier
    with pytest.raises(ConfigError, match="run_or_model"):
        interpret("not-a-run", Untouchable())
    with pytest.raises(DataError, match="targets"):
        interpret(model, DataLoader(TensorDataset(X), batch_size=8))
    before = sorted(tmp_path.iterdir())
    with pytest.raises(FileNotFoundError):
        interpret("0" * 32, Untouchable(), runs_root=tmp_path / "runs")
    assert sorted(tmp_path.iterdir()) == before  # nothing was created


def test_a_binary_model_is_read_as_two_classes():
    torch.manual_seed(0)
    model = f.model(net={"output_dim": 1, "dropout_prob": 0.0}, loss=Losses.BINARY_CROSS_ENTROPY)
    g = torch.Generator().manual_seed(2)
    X, y = torch.randn(40, 8, generator=g), (torch.rand(40, generator=g) > 0.5).float()
    result = interpret(model, loader(X, y.unsqueeze(1), 16), top_k=40)
    z = model.predict(X).logits.reshape(-1)
    expected = confusion_matrix(y.long().numpy(), (z >= 0).long().numpy(), labels=[0, 1])
    np.testing.assert_array_equal(result.confusion, expected)
    bce = F.binary_cross_entropy_with_logits(z, y, reduction="none").numpy()
    for m in result.top_losses:
        assert m.loss == pytest.approx(float(bce[m.sample_id]), rel=1e-5)
        p1 = float(torch.sigmoid(z[m.sample_id]))
        assert m.probability == pytest.approx(p1 if m.prediction == 1 else 1 - p1, rel=1e-5)


def test_a_batch_larger_than_a_prediction_chunk_keeps_its_rows_in_line(classifier):
    model, _, _ = classifier
    g = torch.Generator().manual_seed(3)
    X, y = torch.randn(5000, 8, generator=g), torch.randint(0, 3, (5000,), generator=g)
    whole = interpret(model, (X, y), top_k=5)  # one batch: predicted in 4,096-row chunks
    pred = model.predict(X).classes.numpy()
    expected = confusion_matrix(y.numpy(), pred, labels=[0, 1, 2])
    np.testing.assert_array_equal(whole.confusion, expected)
    for m in whole.top_losses:
        assert m.target == int(y[m.sample_id])
        assert m.display["values"] == pytest.approx(X[m.sample_id].tolist(), abs=1e-5)


def test_a_shuffling_loader_is_said_to_give_positions(classifier):
    model, X, y = classifier
    shuffled = DataLoader(TensorDataset(X, y), batch_size=16, shuffle=True)
    with pytest.warns(UserWarning, match="positions in this iteration's order"):
        result = interpret(model, shuffled)
    # the targets stay in line with their rows: the same matrix as in order
    np.testing.assert_array_equal(result.confusion, interpret(model, loader(X, y, 16)).confusion)


def test_targets_outside_the_classes_are_refused_naming_them(classifier):
    model, X, y = classifier
    bad = y.clone()
    bad[5] = 3
    with pytest.raises(DataError, match=r"targets: 1 targets outside \[0, 3\), e.g. 3"):
        interpret(model, loader(X, bad, 16))
