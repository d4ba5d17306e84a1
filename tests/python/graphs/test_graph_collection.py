"""§3.8: GraphCollection, graph_classifier_spec, loss over labeled graphs, ids, reload."""

import numpy as np
import pytest
import torch

from nnx_lab import (
    Checkpoints,
    Losses,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNTrainParams,
    Optims,
    TaskSpec,
)
from nnx_lab.errors import ConfigError, DataError
from nnx_lab.graph_tasks import IGNORE, GraphCollection, graph_classifier_spec


def _rings(count=48, seed=0):
    """Ring graphs; class 1's node features are shifted: the mean pool separates them."""
    g = torch.Generator().manual_seed(seed)
    graphs, ids, targets = [], [], []
    for i in range(count):
        n, cls = 4 + i % 3, i % 2
        src = torch.arange(n)
        dst = (src + 1) % n
        graphs.append(
            {
                "x": torch.randn(n, 3, generator=g) + 1.5 * cls,
                "edge_index": torch.stack([torch.cat([src, dst]), torch.cat([dst, src])]),
            }
        )
        ids.append(1000 + i)
        targets.append(cls)
    return graphs, ids, targets


def _model(pool="mean"):
    return NNModel(
        params=NNModelParams(
            net=graph_classifier_spec(input_dim=3, num_classes=2, pool=pool),
            loss=Losses.CROSS_ENTROPY,
            task=TaskSpec.categorical(2, ignore_index=IGNORE),
        )
    )


def test_loss_and_metrics_count_only_the_labeled_graphs():
    graphs, ids, targets = _rings(12)
    coll = GraphCollection(graphs, ids, targets=targets, unlabeled=[1000, 1003, 1007])
    model = _model()
    loader = coll.loader(5)
    edp = model.evaluate(loader=loader)
    logits = model.predict(X=loader).logits
    y = torch.tensor(targets)
    labeled = torch.tensor([i not in (0, 3, 7) for i in range(12)])
    expected = torch.nn.functional.cross_entropy(logits[labeled], y[labeled])
    assert edp.valid == 9
    assert edp.loss == pytest.approx(float(expected), rel=1e-5)
    acc = float((logits[labeled].argmax(1) == y[labeled]).float().mean())
    assert edp.accuracy == pytest.approx(acc)


@pytest.mark.parametrize("pool", ["mean", "sum", "max"])
def test_a_graph_classifier_trains_and_reloads_from_its_recipe(pool, runs_root):
    graphs, ids, targets = _rings()
    coll = GraphCollection(graphs, ids, targets=targets, unlabeled=[1001])
    train, val = coll.subset(ids[:32]), coll.subset(ids[32:])
    model = _model(pool)
    run = model.train(
        params=NNTrainParams(
            n_epochs=15,
            train_loader=train.loader(8),
            val_loader=val.loader(8),
            optim=NNOptimParams(name=Optims.ADAM, max_lr=2e-2),
            runs_root=runs_root,
        )
    )
    assert run.idps[-1].val_edp.accuracy >= 0.75
    result = model.predict_proba(val.loader(8))
    np.testing.assert_array_equal(result.sample_ids, np.array(ids[32:]))
    assert result.probabilities.shape == (16, 2)
    rebuilt = NNModel.from_checkpoint(NNCheckpoint.load(run, Checkpoints.LAST, runs_root))
    torch.testing.assert_close(
        rebuilt.predict(X=val.loader(8)).logits, model.predict(X=val.loader(8)).logits
    )
    assert rebuilt.net.pool == pool
    assert {"encoder", "head"} <= {name for name, _ in rebuilt.net.named_children()}


def test_subset_keeps_the_requested_order_and_the_targets():
    graphs, ids, targets = _rings(6)
    coll = GraphCollection(graphs, ids, targets=targets, unlabeled=[1002])
    part = coll.subset([1004, 1002, 1000])
    assert part.ids == [1004, 1002, 1000]
    assert part.targets.tolist() == [0, IGNORE, 0]
    assert part.unlabeled == [1002]
    ((batch, y),) = list(part.loader(3))
    assert batch.num_graphs == 3
    assert y.tolist() == [0, IGNORE, 0]
    # node offsets: every edge stays inside its own graph
    owner = batch.graph
    assert bool((owner[batch.edge_index[0]] == owner[batch.edge_index[1]]).all())


def test_targets_may_be_a_mapping_by_id():
    graphs, ids, _ = _rings(4)
    coll = GraphCollection(graphs, ids, targets={1000: 1, 1001: 0, 1002: 1}, unlabeled=[1003])
    assert coll.targets.tolist() == [1, 0, 1, IGNORE]


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"ids": [1, 1, 2, 3]}, DataError, "repeats"),
        ({"ids": ["a", "b", "c", "d"]}, ConfigError, "integer"),
        ({"unlabeled": [99]}, DataError, "unlabeled"),
        ({"targets": [0, 1, None, 1]}, DataError, "targets"),
        ({"targets": [0, 1]}, DataError, "targets"),
    ],
)
def test_bad_collections_are_refused_naming_the_field(kwargs, error, field):
    graphs, ids, targets = _rings(4)
    args = {"ids": ids, "targets": targets, **kwargs}
    with pytest.raises(error, match=field):
        GraphCollection(graphs, **args)


def test_bad_specs_are_refused():
    with pytest.raises(ConfigError, match="pool"):
        graph_classifier_spec(input_dim=3, num_classes=2, pool="median")
    with pytest.raises(ConfigError, match="num_classes"):
        graph_classifier_spec(input_dim=3, num_classes=0)
