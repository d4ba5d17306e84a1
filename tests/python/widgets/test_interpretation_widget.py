"""The Interpretation widget: interpret()'s payload in one trait, sent once; the toggle
and the clicked cell are page traits (no re-send); refusals before a widget exists."""

from __future__ import annotations

import engine_factories as f
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import nnx_lab
from nnx_lab.errors import ConfigError
from nnx_lab.interpretation import interpret
from nnx_lab.widgets import Interpretation
from nnx_lab.widgets._testing import FakeFrontend


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    model = f.model(net={"dropout_prob": 0.0})
    _, _, X, y = f.data(n_train=8, n_val=60)
    return model, DataLoader(TensorDataset(X, y), batch_size=16)


def test_the_payload_is_the_results_and_is_sent_once(setup):
    model, loader = setup
    w = Interpretation(model, loader, top_k=9, page_size=4)
    try:
        assert nnx_lab.Interpretation is Interpretation
        expected = interpret(model, loader, top_k=9).to_json()
        assert w.data == expected
        assert w.result.confusion.sum() == 60
        assert len(w.data["top_losses"]) == 9
        assert w.page_size == 4
        front = FakeFrontend(w)
        front.set_traits(normalize=True, cell=[1, 2])
        assert w.normalize is True
        assert w.cell == [1, 2]
        assert not any("data" in u for u in front.updates)  # paging and clicks: no re-send
        assert "mistakes" in repr(w)
    finally:
        w.close()


def test_a_page_cannot_pick_a_cell_outside_the_matrix_or_set_the_data(setup):
    model, loader = setup
    w = Interpretation(model, loader)
    try:
        front = FakeFrontend(w)
        front.set_traits(cell=[0, 7])
        assert w.cell == []
        assert "cell=[0, 7] is invalid" in w.error
        before = w.data
        front.set_traits(data={"task": "regression"})
        assert w.data == before
    finally:
        w.close()


def test_a_computed_result_is_drawn_as_it_is(setup):
    model, loader = setup
    result = interpret(model, loader)
    w = Interpretation(result)
    try:
        assert w.result is result
        assert w.data == result.to_json()
    finally:
        w.close()


@pytest.mark.parametrize(
    ("args", "kwargs", "field"),
    [
        ((), {"page_size": 0}, "Interpretation.page_size"),
        ((), {"top_k": 0}, "interpret.top_k"),
        (("result-and-loader",), {}, "Interpretation.loader"),
    ],
)
def test_refusals_come_before_a_widget(setup, args, kwargs, field):
    model, loader = setup
    if args == ("result-and-loader",):
        with pytest.raises(ConfigError, match=field):
            Interpretation(interpret(model, loader), loader)
        return
    with pytest.raises(ConfigError, match=field):
        Interpretation(model, loader, *args, **kwargs)
    with pytest.raises(ConfigError, match=r"Interpretation\.loader"):
        Interpretation(model)
