"""Small general hooks the graph loaders use (docs/graphs.md): a batch source may name
its rows (``sample_ids``) and fingerprint its content (``nnx_identity``); a registered
factory's module may declare ``output_dim``."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from nnx_lab import (
    ModelSpec,
    NNModel,
    NNModelParams,
    NNParams,
    NNTrainParams,
    ProbabilitySpec,
    register_model_factory,
    unregister_model_factory,
)


class Named:
    """A re-iterable list of (X, y) batches that names its rows and its content."""

    def __init__(self, X, y, ids, tag):
        self.batches = [(X, y)]
        self.sample_ids = np.asarray(ids, dtype=np.int64)
        self.nnx_identity = {"content": tag}

    def __iter__(self):
        return iter(self.batches)

    def __len__(self):
        return 1


def _model():
    return NNModel(net_params=NNParams(input_dim=3, output_dim=2, hidden_dims=[4]))


def test_predict_proba_returns_the_ids_a_source_declares():
    X = torch.randn(4, 3)
    source = Named(X, torch.tensor([0, 1, 0, 1]), [40, 7, 12, 3], "a")
    result = _model().predict_proba(source, ProbabilitySpec(kind="categorical"))
    np.testing.assert_array_equal(result.sample_ids, [40, 7, 12, 3])
    plain = _model().predict_proba([(X, torch.zeros(4))], ProbabilitySpec(kind="categorical"))
    np.testing.assert_array_equal(plain.sample_ids, [0, 1, 2, 3])


def test_a_declared_identity_enters_the_run_id_without_a_warning(runs_root, recwarn):
    X, y = torch.randn(8, 3), torch.randint(0, 2, (8,))
    ids = []
    for tag in ("a", "a", "b"):
        run = _model().train(
            params=NNTrainParams(
                n_epochs=1,
                train_loader=Named(X, y, range(8), tag),
                runs_root=runs_root,
                overwrite_existing=True,
            )
        )
        ids.append(run.id)
    assert ids[0] == ids[1] != ids[2]
    assert not [w for w in recwarn if "fingerprint" in str(w.message)]


class Wide(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.lin = nn.Linear(3, config["k"])
        self.output_dim = config["k"]

    def forward(self, x):
        return self.lin(x)


def test_a_factory_module_may_declare_its_width():
    register_model_factory("tests.wide", 1, Wide)
    try:
        model = NNModel(params=NNModelParams(net=ModelSpec("tests.wide", 1, {"k": 5})))
        assert model._shape.output_dim == 5  # known before any batch is probed
    finally:
        unregister_model_factory("tests.wide", 1)
