"""Saving only the adapters (round trip, fingerprint, tampering, refusals before any
file), AdapterLayer, and prefix / prompt tuning of the built-in TransformerNN."""

from __future__ import annotations

import json
import struct

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from nnx_lab import (
    ConfigError,
    Losses,
    NNModel,
    NNModelParams,
    NNTransformerParams,
)
from nnx_lab.engine.model_summary import summarize_model
from nnx_lab.engine.nets_transformer import TransformerNN
from nnx_lab.errors import AdapterFileError, AdapterMismatchError
from nnx_lab.peft import (
    AdapterLayer,
    PrefixTuner,
    PromptTuner,
    apply_dora_to,
    apply_lora_to,
    load_lora_weights,
    save_lora_weights,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))


def _trained(seed: int = 0) -> nn.Module:
    net = _net(seed)
    apply_lora_to(net, "*", r=2, alpha=4, seed=1)
    with torch.no_grad():
        for p in net.parameters():
            if p.requires_grad:
                p.add_(0.1)
    return net


def test_only_the_adapters_are_saved_and_they_load_back(tmp_path):
    net = _trained()
    path = save_lora_weights(net, tmp_path / "lora.safetensors")
    saved = load_file(path)
    assert sorted(saved) == ["0.lora_A", "0.lora_B", "2.lora_A", "2.lora_B"]
    again = _net()
    apply_lora_to(again, "*", r=2, alpha=4, seed=2)  # another draw, overwritten by the load
    x = torch.randn(5, 8)
    assert not torch.equal(again(x), net(x))
    assert load_lora_weights(again, path) == tuple(saved)
    assert torch.equal(again(x), net(x))
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic writer left no temp file


def test_dora_and_adapter_layers_round_trip(tmp_path):
    def build():
        net = _net()
        apply_dora_to(net, "2", r=2, alpha=2, seed=0)
        return nn.Sequential(net, AdapterLayer(3, bottleneck=2))

    net = build()
    with torch.no_grad():
        net[0][2].magnitude.mul_(1.5)
        net[1].up.weight.fill_(0.2)
    save_lora_weights(net, tmp_path / "a.safetensors")
    again = build()
    load_lora_weights(again, tmp_path / "a.safetensors")
    x = torch.randn(4, 8)
    assert torch.equal(again(x), net(x))


def test_another_base_is_refused_before_any_value_is_copied(tmp_path):
    save_lora_weights(_trained(seed=0), tmp_path / "lora.safetensors")
    other = _net(seed=1)  # the same architecture, other base weights
    apply_lora_to(other, "*", r=2, alpha=4, seed=2)
    before = {k: v.clone() for k, v in other.state_dict().items()}
    with pytest.raises(AdapterMismatchError, match="trained on another base model"):
        load_lora_weights(other, tmp_path / "lora.safetensors")
    assert all(torch.equal(before[k], v) for k, v in other.state_dict().items())
    wider = _net()
    apply_lora_to(wider, "*", r=3, alpha=4)
    with pytest.raises(AdapterMismatchError, match="other adapters"):
        load_lora_weights(wider, tmp_path / "lora.safetensors")


def test_an_edited_or_foreign_file_is_refused(tmp_path):
    path = save_lora_weights(_trained(), tmp_path / "lora.safetensors")
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01  # one bit of the last tensor
    edited = tmp_path / "edited.safetensors"
    edited.write_bytes(bytes(data))
    target = _net()
    apply_lora_to(target, "*", r=2, alpha=4)
    with pytest.raises(AdapterFileError, match="do not match the digest"):
        load_lora_weights(target, edited)
    (tmp_path / "junk.safetensors").write_bytes(b"not a file")
    with pytest.raises(AdapterFileError, match="not a safetensors file"):
        load_lora_weights(target, tmp_path / "junk.safetensors")
    header = json.dumps({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    header += b" " * (-len(header) % 8)
    (tmp_path / "plain.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(4))
    with pytest.raises(AdapterFileError, match="not an adapter file"):
        load_lora_weights(target, tmp_path / "plain.safetensors")


def test_refused_saves_write_nothing(tmp_path):
    with pytest.raises(ConfigError, match="no adapter layer"):
        save_lora_weights(_net(), tmp_path / "none.safetensors")
    with pytest.raises(ConfigError, match="folder does not exist"):
        save_lora_weights(_trained(), tmp_path / "missing" / "a.safetensors")
    assert list(tmp_path.iterdir()) == []


def test_an_adapter_layer_is_an_identity_bottleneck_at_first():
    layer = AdapterLayer(12, bottleneck=3)
    x = torch.randn(2, 5, 12)
    assert torch.equal(layer(x), x)
    assert sum(p.numel() for p in layer.parameters()) == 2 * 12 * 3 + 3 + 12
    with pytest.raises(ConfigError, match=r"AdapterLayer\.bottleneck"):
        AdapterLayer(12, bottleneck=0)


def _transformer() -> TransformerNN:
    torch.manual_seed(0)
    return TransformerNN(NNTransformerParams(vocab_size=40, n_layers=2, d_model=16, n_heads=4))


def test_prefix_and_prompt_tuners_freeze_the_net_and_train_their_counts(runs_root):
    ids = torch.randint(0, 40, (3, 9))
    plain = _transformer()(ids)
    for tuner, count in (
        (PrefixTuner(_transformer(), n_prefix=5, seed=0), 2 * 2 * 5 * 16),
        (PromptTuner(_transformer(), n_prompt=5, seed=0), 5 * 16),
    ):
        trainable = sum(p.numel() for p in tuner.parameters() if p.requires_grad)
        assert trainable == count
        assert all(not p.requires_grad for p in tuner.base.parameters())
        out = tuner(ids)
        assert out.shape == plain.shape
        assert not torch.allclose(out, plain)
        row = summarize_model(tuner).rows[0]
        assert row.columns["adapter"] == f"{tuner.adapter_kind}(n_tokens=5)"
    with pytest.raises(ConfigError, match="TransformerNN"):
        PrefixTuner(_net())


def test_prefix_keeps_the_causal_order():
    tuner = PrefixTuner(_transformer(), n_prefix=3, seed=0)
    ids = torch.randint(0, 40, (2, 8))
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 40
    assert torch.equal(tuner(ids)[:, :-1], tuner(changed)[:, :-1])


class _LastToken(nn.Module):
    """The logits of the last position: a sequence classifier on top of a tuner."""

    def __init__(self, tuner: nn.Module) -> None:
        super().__init__()
        self.tuner = tuner

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.tuner(ids)[:, -1]


@pytest.mark.parametrize("kind", [PrefixTuner, PromptTuner])
def test_a_tuner_trains_through_nnmodel_and_only_its_tokens_move(runs_root, kind):
    from torch.utils.data import DataLoader, TensorDataset

    from nnx_lab import NNOptimParams, NNTrainParams

    tuner = kind(_transformer(), 4, seed=0)
    base = {k: v.clone() for k, v in tuner.base.state_dict().items()}
    learned = {k: v.detach().clone() for k, v in tuner.adapter_tensors().items()}
    ids = torch.randint(0, 40, (64, 10), generator=torch.Generator().manual_seed(0))
    NNModel(module=_LastToken(tuner), params=NNModelParams(loss=Losses.CROSS_ENTROPY)).train(
        NNTrainParams(
            n_epochs=1,
            train_loader=DataLoader(TensorDataset(ids, ids[:, 0]), batch_size=16),
            optim=NNOptimParams(max_lr=1e-2),
            runs_root=str(runs_root),
        )
    )
    assert all(torch.equal(base[k], v) for k, v in tuner.base.state_dict().items())
    assert all(not torch.equal(learned[k], v) for k, v in tuner.adapter_tensors().items())


def _reference_forward(net: TransformerNN, ids: torch.Tensor) -> torch.Tensor:
    """The plain decoder forward written out from the network's own layers: what
    TransformerNN computed before it took prompt= and prefix=."""
    import torch.nn.functional as F

    from nnx_lab.engine.nets_transformer import _rope

    x = net.drop(net.embed(ids))
    for block in net.blocks:
        a, h = block.attn, block.norm1(x)
        n, t, d = h.shape
        q, k, v = a.qkv(h).view(n, t, 3, a.n_heads, d // a.n_heads).permute(2, 0, 3, 1, 4)
        q, k = _rope(q, a.rope), _rope(k, a.rope)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + a.out(y.transpose(1, 2).reshape(n, t, d))
        x = x + block.mlp(block.norm2(x))
    return net.head(net.norm(x))


def test_without_prompt_or_prefix_the_transformer_is_the_plain_one_bit_for_bit():
    net = _transformer().eval()
    ids = torch.randint(0, 40, (3, 9))
    assert torch.equal(net(ids), _reference_forward(net, ids))
    with pytest.raises(ConfigError, match="one pair per block"):
        net(ids, prefix=[(torch.zeros(4, 2, 4), torch.zeros(4, 2, 4))])
    from nnx_lab.engine.nets_transformer import KVCache

    with pytest.raises(ConfigError, match="not supported"):
        net(ids, KVCache(), prompt=torch.zeros(2, 16))
