"""§2.12: NNGraphDataset's masks as splits, the graph networks, and node scoring."""

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from nnx_lab import (
    Activations,
    Devices,
    EarlyStopping,
    Losses,
    Nets,
    NNGraphDataset,
    NNModel,
    NNModelParams,
    NNParams,
    NNTrainParams,
    ProbabilitySpec,
)
from nnx_lab.errors import ConfigError, DataError


class TinySplitGraph:  # the spec's class, verbatim
    num_features, num_classes = 4, 2

    def __init__(self, root, transform=None):
        train = torch.tensor([True, True, True, False, False, False])
        self.data = Data(
            x=torch.randn(6, 4),
            y=torch.tensor([0, 1, 0, 1, 0, 1]),
            edge_index=torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]]),
            train_mask=train,
            val_mask=torch.zeros(6, dtype=torch.bool),
            test_mask=~train,
        )

    def __getitem__(self, idx):
        return self.data


def _community_graph(n=90, seed=0):
    """Three communities: features noisy one-hots, edges mostly inside a community."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 3
    x = torch.nn.functional.one_hot(y, 3).float() + 0.8 * torch.randn(n, 3, generator=g)
    u = torch.randint(0, n, (900,), generator=g)
    v = torch.randint(0, n, (900,), generator=g)
    keep = y[u] == y[v]
    ei = torch.stack([torch.cat([u[keep], v[keep]]), torch.cat([v[keep], u[keep]])])
    train = torch.arange(n) < n // 2
    val = (torch.arange(n) >= n // 2) & (torch.arange(n) < 3 * n // 4)

    class Community:
        num_classes = 3

        def __init__(self, root, transform=None):
            self.data = Data(
                x=x, y=y, edge_index=ei, train_mask=train, val_mask=val, test_mask=~(train | val)
            )

        def __getitem__(self, idx):
            return self.data

    return Community


def _model(dataset, net, hidden=(8,)):
    return NNModel(
        net_params=NNParams(
            input_dim=dataset.input_dim,
            output_dim=dataset.output_dim,
            hidden_dims=list(hidden),
            dropout_prob=0.0,
            activation=Activations.RELU,
        ),
        params=NNModelParams(net=net, device=Devices.CPU, loss=Losses.CROSS_ENTROPY),
    )


def test_the_spec_snippet_runs_with_an_empty_validation_split(runs_root):
    dataset = NNGraphDataset(ds_class=TinySplitGraph, sampler="full")
    assert dataset.val_loader is None
    assert dataset.batch_sizes == (3, 0, 3)
    assert dataset.state()["batch_sizes"] == ["3", "0", "3"]
    model = _model(dataset, Nets.GRAPH_CONV)
    run = model.train(
        params=NNTrainParams(
            n_epochs=5,
            train_loader=dataset.train_loader,
            val_loader=dataset.val_loader,
            runs_root=runs_root,
        ),
        callbacks=[EarlyStopping(monitor="train_edp.loss", patience=2)],
    )
    assert run.idps
    assert all(idp.val_edp is None for idp in run.idps)
    edp = model.evaluate(loader=dataset.test_loader)
    assert edp.samples == 3  # the test split's seed rows, not the 6 nodes
    pred = model.predict(X=dataset.test_loader)
    truth = torch.tensor([1, 0, 1])
    assert edp.accuracy == pytest.approx(float((pred.classes == truth).float().mean()))


@pytest.mark.parametrize("net", [Nets.GRAPH_CONV, Nets.GRAPH_SAGE, Nets.GRAPH_ATT])
def test_each_graph_net_learns_a_community_graph(net, runs_root):
    dataset = NNGraphDataset(ds_class=_community_graph(), sampler="full")
    assert dataset.batch_sizes == (45, 22, 23)
    model = _model(dataset, net, hidden=(16,))
    before = model.evaluate(loader=dataset.val_loader).loss
    from nnx_lab import NNOptimParams, Optims

    run = model.train(
        params=NNTrainParams(
            n_epochs=40,
            train_loader=dataset.train_loader,
            val_loader=dataset.val_loader,
            optim=NNOptimParams(name=Optims.ADAM, max_lr=5e-2),
            runs_root=runs_root,
        )
    )
    last = run.idps[-1].val_edp
    assert last.samples == 22
    assert last.loss < before
    assert model.evaluate(loader=dataset.test_loader).accuracy > 0.6  # chance is 1/3


def test_predict_proba_names_the_seed_nodes_by_their_global_index():
    dataset = NNGraphDataset(ds_class=_community_graph(), sampler="full")
    model = _model(dataset, Nets.GRAPH_SAGE)
    result = model.predict_proba(dataset.test_loader, ProbabilitySpec(kind="categorical"))
    expected = np.arange(90)[3 * 90 // 4 :]
    np.testing.assert_array_equal(result.sample_ids, expected)
    assert result.probabilities.shape == (len(expected), 3)
    # the rows are the seed nodes' rows of a forward over the whole graph
    data = dataset.test_loader.batches[0][0]
    with torch.no_grad():
        model.net.eval()
        everything = model.net(type(data)(data.x, data.edge_index))
    torch.testing.assert_close(result.logits, everything[expected])


def test_an_empty_train_mask_is_refused_at_construction():
    class NoTrain(TinySplitGraph):
        def __init__(self, root, transform=None):
            super().__init__(root, transform)
            self.data.train_mask = torch.zeros(6, dtype=torch.bool)

    with pytest.raises(DataError, match="train_mask"):
        NNGraphDataset(ds_class=NoTrain)


def test_a_mask_of_the_wrong_shape_is_refused():
    class Short(TinySplitGraph):
        def __init__(self, root, transform=None):
            super().__init__(root, transform)
            self.data.val_mask = torch.zeros(5, dtype=torch.bool)

    with pytest.raises(DataError, match="val_mask"):
        NNGraphDataset(ds_class=Short)


def test_neighbour_sampling_is_refused_naming_the_backend():
    with pytest.raises(ConfigError, match="pyg-lib"):
        NNGraphDataset(ds_class=TinySplitGraph, sampler="neighbor")


def test_an_edge_to_a_missing_node_is_refused():
    class Broken(TinySplitGraph):
        def __init__(self, root, transform=None):
            super().__init__(root, transform)
            self.data.edge_index = torch.tensor([[0, 1], [1, 9]])

    with pytest.raises(DataError, match="edge_index"):
        NNGraphDataset(ds_class=Broken)


def test_the_run_id_follows_the_graph_content(runs_root):
    a = NNGraphDataset(ds_class=_community_graph(seed=0))
    b = NNGraphDataset(ds_class=_community_graph(seed=1))
    assert a.train_loader.nnx_identity != b.train_loader.nnx_identity
    ids = []
    for ds in (a, b):
        run = _model(ds, Nets.GRAPH_CONV).train(
            params=NNTrainParams(n_epochs=1, train_loader=ds.train_loader, runs_root=runs_root)
        )
        ids.append(run.id)
    assert ids[0] != ids[1]


def test_no_validation_hook_runs_for_an_absent_split(runs_root):
    dataset = NNGraphDataset(ds_class=TinySplitGraph)
    calls = []

    def spy(ctx):
        calls.append(ctx.epoch_idx)
        raise AssertionError("validation ran without a validation split")

    run = _model(dataset, Nets.GRAPH_CONV).train(
        params=NNTrainParams(
            n_epochs=3, train_loader=dataset.train_loader, val_loader=None, runs_root=runs_root
        ),
        eval_step_fn=spy,
    )
    assert calls == []
    assert len(run.idps) == 3
