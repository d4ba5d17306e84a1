"""Without the graph extra every name imports, and building refuses with the install
command. torch_geometric is made unimportable (sys.modules[name] = None), so this runs
the same in an environment that has it."""

import sys

import pytest
import torch

INSTALL = 'pip install "nnx-lab[graph]"'


@pytest.fixture
def no_pyg(monkeypatch):
    for name in [
        m for m in sys.modules if m == "torch_geometric" or m.startswith("torch_geometric.")
    ]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "torch_geometric", None)


def test_the_names_import_and_refuse_with_the_install_command(no_pyg):
    import nnx_lab
    from nnx_lab import Nets, NNGraphDataset, NNModel, NNModelParams, NNParams
    from nnx_lab.graph_tasks import GraphCollection, graph_classifier_spec
    from nnx_lab.link_tasks import LinkTask, link_metrics, link_predictor_spec, split_links

    class Anything:
        def __init__(self, root, transform=None):
            raise AssertionError("the dataset class is not called without the extra")

    refusals = [
        lambda: NNGraphDataset(ds_class=Anything),
        lambda: GraphCollection([{"x": torch.zeros(2, 1)}], [0], targets=[0]),
        lambda: graph_classifier_spec(input_dim=3, num_classes=2),
        lambda: link_predictor_spec(input_dim=3),
        lambda: NNModel(
            net_params=NNParams(input_dim=3, output_dim=2, hidden_dims=[4]),
            params=NNModelParams(net=Nets.GRAPH_CONV),
        ),
    ]
    for make in refusals:
        with pytest.raises(ImportError, match="torch-geometric") as caught:
            make()
        assert INSTALL in str(caught.value)
    # the plain parts need no extra
    split = split_links(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), 6, val=0.25, test=0.25)
    assert sum(len(p) for p in split.positives.values()) == 4
    with pytest.raises(ImportError, match="torch-geometric"):
        LinkTask(split)
    assert link_metrics([2.0, -1.0], [1, 0])["auroc"] == 1.0
    assert "NNGraphDataset" in nnx_lab.__all__


def test_the_engine_imports_without_the_extra(no_pyg):
    from nnx_lab import Nets, NNModel, NNParams

    model = NNModel(net_params=NNParams(input_dim=3, output_dim=2, hidden_dims=[4]))
    assert model.predict(X=torch.zeros(2, 3)).logits.shape == (2, 2)
    assert Nets("graph_sage") is Nets.GRAPH_SAGE
