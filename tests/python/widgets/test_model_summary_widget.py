"""The ModelSummary widget: the engine's summary in one trait, fold and search as page
traits, the trainable state followed live, a text repr."""

from __future__ import annotations

import pytest
import torch

from nnx_lab import ConfigError, DataError, Losses, Nets, NNConvParams, NNModel, NNModelParams
from nnx_lab.engine.model_summary import summarize_model
from nnx_lab.widgets import ModelSummary
from nnx_lab.widgets._testing import FakeFrontend

CONV = NNConvParams(output_dim=10, in_channels=1, image_size=8, conv_channels=(4, 8))


def _cnn():
    return NNModel(CONV, NNModelParams(net=Nets.CONV, loss=Losses.CROSS_ENTROPY))


def test_the_widget_shows_the_engines_summary():
    model = _cnn()
    X = torch.rand(2, 1, 8, 8)
    w = ModelSummary(model, X, live=False)
    try:
        assert w.data == summarize_model(model, X).to_json()
        assert w.collapsed == []  # no subtree at depth 2 or below has children
        assert "Conv2d" in repr(w)
        assert "(2, 4, 8, 8)" in w.text()
        assert w.find("head.1") == ["head.1"]
        assert w.summary().endswith("(0 frozen)")
    finally:
        w.close()


def test_freezing_a_layer_is_followed_without_a_new_forward():
    model = _cnn()
    w = ModelSummary(model, torch.rand(2, 1, 8, 8), live=False)
    try:
        front = FakeFrontend(w)
        assert not w.poll()
        model.net.features[0].requires_grad_(False)
        assert w.poll()
        rows = {r["path"]: r for r in w.data["rows"]}
        assert rows["features.0"]["state"] == "frozen"
        assert rows["features.0"]["output_shape"] == [2, 4, 8, 8]  # kept
        assert any("data" in u for u in front.updates)
        before = w.version
        front.widget._dispatch_frontend_msg(w, {"kind": "refresh"}, [])
        assert w.version == before + 1
    finally:
        w.close()


def test_the_live_thread_stops_on_close():
    w = ModelSummary(_cnn(), live=True)
    thread = w._thread
    w.close()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_the_page_sets_only_the_query_and_the_folds():
    w = ModelSummary(_cnn(), live=False, collapse_below=1)
    try:
        assert w.collapsed == ["features", "head"]
        front = FakeFrontend(w)
        front.set_traits(query="conv", collapsed=[])
        assert w.query == "conv"
        assert w.collapsed == []
        data = w.data
        front.set_traits(data={"rows": []})
        assert w.data == data  # the kernel owns the summary
    finally:
        w.close()


def test_bad_arguments_are_refused_before_a_widget_exists():
    with pytest.raises(ConfigError):
        ModelSummary("not a model")
    with pytest.raises(ConfigError):
        ModelSummary(_cnn(), live="yes")
    with pytest.raises(DataError, match="does not go through the network"):
        ModelSummary(_cnn(), torch.rand(2, 3))  # not inputs the network takes


def test_the_widget_shows_the_fine_tuning_rules_and_follows_freezing():
    from nnx_lab import NNOptimParams, NNParamGroupSpec

    model = _cnn()
    optim = NNOptimParams(
        max_lr=1e-3, param_groups=[NNParamGroupSpec("head.*", lr_multiplier=10.0)]
    )
    w = ModelSummary(model, optim=optim, live=False)
    try:
        rows = {r["path"]: r for r in w.data["rows"]}
        assert rows["head.1"]["columns"]["rule"] == "head.*"
        assert rows["head.1"]["columns"]["lr"] == "0.01"
        assert rows["features.0"]["columns"]["rule"] == "default"
        model.freeze("features.0.*")
        assert w.poll()
        rows = {r["path"]: r for r in w.data["rows"]}
        assert rows["features.0"]["columns"]["frozen"] == "yes"
        assert "head.*" in w.text()
    finally:
        w.close()
