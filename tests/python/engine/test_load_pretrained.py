"""``load_pretrained`` (§3.1): every source kind, prefix and key_map, and the refusals
that leave the module untouched."""

from __future__ import annotations

import engine_factories as f
import pytest
import torch
from safetensors.torch import save_file

from nnx_lab import Checkpoints, ConfigError, NNCheckpoint, load_pretrained


class Encoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.norm = torch.nn.BatchNorm2d(4)


class Classifier(torch.nn.Module):
    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.encoder = Encoder()
        self.head = torch.nn.Linear(4, classes)


def _pretrained(classes: int = 5) -> Classifier:
    torch.manual_seed(7)
    net = Classifier(classes)
    net.encoder.norm.running_mean.fill_(0.5)  # a buffer travels too
    return net


def _same(a: torch.nn.Module, b: torch.nn.Module, prefix: str = "") -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return all(torch.equal(sa[k], sb[k]) for k in sa if k.startswith(prefix))


def _snapshot(net: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in net.state_dict().items()}


@pytest.mark.parametrize("kind", ["safetensors", "pt", "state_dict", "module"])
def test_each_source_kind_loads_every_matching_key(tmp_path, kind):
    source = _pretrained()
    if kind == "safetensors":
        src = tmp_path / "w.safetensors"
        save_file({k: v.contiguous() for k, v in source.state_dict().items()}, str(src))
    elif kind == "pt":
        src = tmp_path / "w.pt"
        torch.save(source.state_dict(), src)
    else:
        src = source.state_dict() if kind == "state_dict" else source
    net = Classifier()
    result = load_pretrained(net, src)
    assert _same(net, source)
    assert set(result.loaded_keys) == set(source.state_dict())
    assert result.missing_keys == result.unexpected_keys == ()


def test_a_wrapped_pt_state_dict_is_unwrapped_and_two_keys_on_one_are_refused(tmp_path):
    source = _pretrained()
    path = tmp_path / "w.pth"
    torch.save({"state_dict": source.state_dict(), "epoch": 3}, path)
    net = Classifier()
    load_pretrained(net, path)
    assert _same(net, source)
    with pytest.raises(ConfigError, match="two source keys map to this key"):
        load_pretrained(Classifier(), source, key_map={"head.bias": "head.weight"})


def test_a_pt_file_with_pickled_code_is_refused(tmp_path):
    path = tmp_path / "w.pt"
    torch.save({"state_dict": _pretrained().state_dict(), "fn": Classifier}, path)
    net = Classifier()
    before = _snapshot(net)
    with pytest.raises(ConfigError, match="weights_only=True"):
        load_pretrained(net, path)
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())


def test_prefix_selects_and_strips_and_key_map_renames():
    source = _pretrained()
    encoder = Encoder()
    result = load_pretrained(encoder, source, prefix="encoder.")
    assert _same(encoder, source.encoder)
    assert result.missing_keys == ()
    assert result.unexpected_keys == ()

    renamed = {f"backbone.{k}": v for k, v in source.encoder.state_dict().items()}
    net = Classifier()
    result = load_pretrained(net, renamed, key_map=lambda k: k.replace("backbone.", "encoder."))
    assert _same(net.encoder, source.encoder)
    assert set(result.missing_keys) == {"head.weight", "head.bias"}

    net = Classifier()
    result = load_pretrained(
        net, source.state_dict(), key_map={"head.weight": "unused.weight", "head.bias": None}
    )
    assert result.unexpected_keys == ("unused.weight",)
    assert "head.bias" in result.missing_keys


def test_a_shape_mismatch_is_refused_naming_the_key_and_nothing_is_copied():
    source = _pretrained(classes=10)  # a head for 10 classes, the module has 5
    net = Classifier(classes=5)
    before = _snapshot(net)
    with pytest.raises(ConfigError) as err:
        load_pretrained(net, source)
    text = str(err.value)
    assert "head.weight" in text
    assert "(10, 4)" in text
    assert "(5, 4)" in text
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    # dropping the head loads the encoder
    result = load_pretrained(net, source, key_map=lambda k: None if k.startswith("head.") else k)
    assert _same(net.encoder, source.encoder)
    assert "head.weight" in result.missing_keys


def test_strict_refuses_missing_and_unexpected_keys_before_copying():
    source = _pretrained()
    net = Classifier()
    before = _snapshot(net)
    extra = {**source.state_dict(), "extra.weight": torch.zeros(1)}
    with pytest.raises(ConfigError, match=r"unexpected keys \['extra.weight'\]"):
        load_pretrained(net, extra, strict=True)
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    with pytest.raises(ConfigError, match="missing keys"):
        load_pretrained(net, source.encoder.state_dict(), strict=True, prefix="conv.")


def test_a_source_that_matches_no_key_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="none matches"):
        load_pretrained(Classifier(), _pretrained(), prefix="backbone.")
    with pytest.raises(ConfigError, match="no such file"):
        load_pretrained(Classifier(), tmp_path / "missing.safetensors")
    (tmp_path / "w.npz").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"\.safetensors, \.pt"):
        load_pretrained(Classifier(), tmp_path / "w.npz")


def test_an_nnx_lab_checkpoint_and_model_are_sources(runs_root):
    trained = f.model()
    run = trained.train(f.train_params(runs_root, n_epochs=1))
    fresh = f.model(net={"hidden_dims": [32, 16]})
    fresh.net.layers[0].weight.data.zero_()
    result = load_pretrained(fresh, NNCheckpoint.load(run, Checkpoints.LAST))
    assert _same(fresh.net, trained.net)
    assert result.missing_keys == ()
    other = f.model()
    load_pretrained(other.net, trained)
    assert _same(other.net, trained.net)
