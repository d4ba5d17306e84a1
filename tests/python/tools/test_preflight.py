"""preflight (issue 28): each check catches its problem, a good setup passes, and
nothing is written: no run directory, the model's weights untouched."""

from __future__ import annotations

import pytest
import torch
from engine_factories import model, train_params
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab.errors import ConfigError
from nnx_lab.preflight import preflight


def _loader(n=192, classes=3, seed=0, labels=None, nan_at=None):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 8, generator=g)
    y = (X[:, 0] > 0).long() + (X[:, 1] > 0.5).long() if classes == 3 else X[:, 0].gt(0).long()
    if labels is not None:
        y = labels(y)
    if nan_at is not None:
        X[nan_at, 2] = float("nan")
    return DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True, generator=g)


def _params(root, loader, **kw):
    return train_params(root, loader, val_loader=None, progress=False, **kw)


def test_a_good_setup_passes_and_nothing_is_written(runs_root):
    m = model()
    before = {k: v.clone() for k, v in m.net.state_dict().items()}
    rng = torch.get_rng_state()
    report = preflight(m, _params(runs_root, _loader()))
    assert report.passed, str(report)
    assert [c.name for c in report.checks] == ["data", "gradients", "overfit", "lr"]
    assert not runs_root.exists()  # no run directory, not even the root
    assert all(torch.equal(before[k], v) for k, v in m.net.state_dict().items())
    assert torch.equal(rng, torch.get_rng_state())
    assert report["overfit"].details["last_loss"] < report["overfit"].details["first_loss"] / 4
    assert report["lr"].details["suggested_lr"] is not None


def test_a_frozen_layer_is_named(runs_root):
    m = model()
    m.net.layers[3].weight.requires_grad_(False)  # frozen by mistake
    report = preflight(m, _params(runs_root, _loader()), checks=["gradients"])
    assert not report.passed
    assert "layers.3.weight are frozen" in report.problems["gradients"]
    ok = preflight(
        m, _params(runs_root, _loader()), checks=["gradients"], allow_frozen=["layers.3.*"]
    )
    assert ok.passed


class _Detached(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)).detach())  # a gets no gradient


def test_a_detached_layer_is_named(runs_root):
    from nnx_lab import Losses, NNModel, NNModelParams

    m = NNModel(module=_Detached(), params=NNModelParams(loss=Losses.CROSS_ENTROPY))
    report = preflight(m, _params(runs_root, _loader()), checks=["gradients"])
    assert "no gradient reaches a.weight, a.bias" in report.problems["gradients"]


def test_labels_outside_the_classes_are_named(runs_root):
    report = preflight(
        model(), _params(runs_root, _loader(labels=lambda y: y + 1)), checks=["data"]
    )
    assert "label 3" in report.problems["data"]
    assert "3 outputs" in report.problems["data"]


def test_a_missing_or_rare_class_is_named(runs_root):
    report = preflight(
        model(), _params(runs_root, _loader(labels=lambda y: y.clamp(max=1))), checks=["data"]
    )
    assert "class(es) [2] have no row" in report.problems["data"]
    rare = _loader(n=400, labels=lambda y: torch.where(torch.arange(len(y)) < 5, 2, y % 2))
    assert (
        "class 2 has 5 rows"
        in preflight(model(), _params(runs_root, rare), checks=["data"]).problems["data"]
    )


def test_nan_in_the_features_is_named(runs_root):
    loader = DataLoader(_loader(nan_at=40).dataset, batch_size=32)
    report = preflight(model(), _params(runs_root, loader), checks=["data"])
    assert "features of batch 1 hold NaN/inf (row 8, column 2" in report.problems["data"]


def test_a_batch_that_cannot_be_overfitted_fails(runs_root):
    from nnx_lab import NNOptimParams

    tiny = NNOptimParams(max_lr=1e-7)  # far too small to move in 100 updates
    report = preflight(model(), _params(runs_root, _loader(), optim=tiny), checks=["overfit"])
    assert "not below" in report.problems["overfit"]


def test_a_learning_rate_far_above_the_sweep_is_named(runs_root):
    from nnx_lab import NNOptimParams

    huge = NNOptimParams(max_lr=50.0)
    report = preflight(model(), _params(runs_root, _loader(), optim=huge), checks=["lr"])
    assert "max_lr=50" in report.problems["lr"]


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"checks": ["speed"]}, "preflight.checks"),
        ({"steps": 0}, "preflight.steps"),
        ({"factor": 1.0}, "preflight.factor"),
    ],
)
def test_bad_arguments_are_refused_first(runs_root, kw, field):
    with pytest.raises(ConfigError, match=field):
        preflight(model(), _params(runs_root, _loader()), **kw)
    assert not runs_root.exists()
