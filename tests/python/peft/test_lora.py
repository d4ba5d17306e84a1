"""LoRA, DoRA and IA3 through the public API: counts, the frozen base, merging, training
through NNModel with freeze and param groups, and a bitwise resume."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    ConfigError,
    Losses,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNTrainParams,
    freeze,
)
from nnx_lab.engine.model_summary import summarize_model
from nnx_lab.peft import (
    DoRALinear,
    IA3Linear,
    LoRALinear,
    apply_dora_to,
    apply_ia3_to,
    apply_lora_to,
    merge_adapters,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3)
    )


def _loaders():
    g = torch.Generator().manual_seed(1)
    X, Xv = torch.randn(192, 8, generator=g), torch.randn(64, 8, generator=g)
    y, yv = (X[:, 0] > 0).long() + (X[:, 1] > 0).long(), (Xv[:, 0] > 0).long()
    return (
        DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True),
        DataLoader(TensorDataset(Xv, yv), batch_size=64),
    )


def _train(runs_root, **kw):
    train, val = _loaders()
    base = {
        "n_epochs": 2,
        "seed": 3,
        "train_loader": train,
        "val_loader": val,
        "optim": NNOptimParams(max_lr=1e-2),
        "runs_root": str(runs_root),
    }
    return NNTrainParams(**{**base, **kw})


def _lora_net(seed: int = 0, dropout: float = 0.0) -> nn.Module:
    net = _net(seed)
    freeze(net)
    apply_lora_to(net, ["0", "2"], r=4, alpha=8, dropout=dropout, seed=5)
    return net


def test_lora_of_rank_r_trains_exactly_r_times_in_plus_out_per_layer(runs_root):
    net = _lora_net()
    trainable = {n: p.numel() for n, p in net.named_parameters() if p.requires_grad}
    assert trainable == {"0.lora_A": 32, "0.lora_B": 64, "2.lora_A": 64, "2.lora_B": 64}
    base = {n: p.detach().clone() for n, p in net.named_parameters() if not p.requires_grad}
    lora = {n: p.detach().clone() for n, p in net.named_parameters() if p.requires_grad}
    NNModel(module=net, params=NNModelParams(loss=Losses.CROSS_ENTROPY)).train(_train(runs_root))
    after = dict(net.named_parameters())
    assert all(torch.equal(after[n], v) for n, v in base.items())  # the base never moved
    assert all(not torch.equal(after[n], v) for n, v in lora.items())  # every adapter did


def test_a_fresh_adapter_changes_nothing():
    x = torch.randn(7, 8)
    plain = _net()(x)
    for apply in (apply_lora_to, apply_dora_to, apply_ia3_to):
        net = _net()
        apply(net, "*")
        assert torch.equal(net(x), plain), apply.__name__


def _perturbed(apply) -> nn.Module:
    net = _net()
    apply(net, ["0", "4"])
    g = torch.Generator().manual_seed(9)
    with torch.no_grad():
        for p in net.parameters():
            if p.requires_grad:
                p.add_(torch.randn(p.shape, generator=g) * 0.3)
    return net


@pytest.mark.parametrize("apply", [apply_lora_to, apply_dora_to, apply_ia3_to])
def test_merging_gives_the_same_predictions_and_plain_linears(apply):
    net = _perturbed(apply)
    x = torch.randn(50, 8)
    before = net(x)
    assert merge_adapters(net) == ("0", "4")
    assert [type(m) for m in net] == [nn.Linear, nn.ReLU, nn.Linear, nn.ReLU, nn.Linear]
    assert not torch.equal(net(x), _net()(x))  # the adaptation is inside the weights
    torch.testing.assert_close(net(x), before)  # fp32: atol 1e-5, rtol 1.3e-6


def test_dora_and_ia3_train_their_documented_counts():
    dora, ia3 = _net(), _net()
    freeze(dora)
    freeze(ia3)
    apply_dora_to(dora, "2", r=2, alpha=4)
    apply_ia3_to(ia3, ["2", "4"])
    assert isinstance(dora[2], DoRALinear)
    assert isinstance(ia3[4], IA3Linear)
    count = lambda m: sum(p.numel() for p in m.parameters() if p.requires_grad)  # noqa: E731
    assert count(dora) == 2 * (16 + 16) + 16  # r * (in + out) + out
    assert count(ia3) == 16 + 3  # one scale per output
    torch.testing.assert_close(dora[2].magnitude, dora[2].base.weight.norm(dim=1))


def test_dora_matches_its_formula():
    net = _perturbed(apply_dora_to)
    layer, x = net[0], torch.randn(4, 8)
    w = layer.base.weight + layer.scaling * layer.lora_B @ layer.lora_A
    expected = x @ (layer.magnitude[:, None] * w / w.norm(dim=1, keepdim=True)).T + layer.base.bias
    torch.testing.assert_close(layer(x), expected)


def test_refusals_name_the_field_and_change_nothing():
    net = _net()
    before = repr(net)
    with pytest.raises(ConfigError, match=r"target_patterns.*could match: 0, 2, 4"):
        apply_lora_to(net, ["0", "encoder.*"])  # the first pattern was fine: still nothing
    with pytest.raises(ConfigError, match=r"apply_lora_to\.r"):
        apply_lora_to(net, "*", r=0)
    with pytest.raises(ConfigError, match=r"alpha"):
        apply_lora_to(net, "*", alpha=-1)
    with pytest.raises(ConfigError, match=r"dropout"):
        apply_lora_to(net, "*", dropout=1.0)
    with pytest.raises(ConfigError, match="merge"):
        merge_adapters(net)
    assert repr(net) == before
    assert all(p.requires_grad for p in net.parameters())
    apply_lora_to(net, "0")
    with pytest.raises(ConfigError, match="already holds an adapter"):
        apply_ia3_to(net, "0")
    with pytest.raises(ConfigError, match=r"pass an nn\.Linear"):
        LoRALinear(nn.ReLU())


def test_the_summary_shows_the_adapters_and_the_trainable_fraction():
    net = _lora_net()
    summary = summarize_model(net)
    row = {r.path: r for r in summary.rows}
    assert row["0"].columns == {"adapter": "LoRA(r=4, alpha=8)", "adapter params": "96"}
    assert row["0.base"].state == "frozen"
    assert "adapter" not in row["0.base"].columns
    trainable = 96 + 128
    assert summary.totals["trainable"] == trainable
    assert summary.totals["trainable_fraction"] == trainable / summary.totals["params"]
    assert "LoRA(r=4, alpha=8)" in summary.text()
    assert "% trainable" in summary.text()


def test_param_groups_rules_reach_the_adapters(runs_root):
    net = _lora_net()
    optim = NNOptimParams(max_lr=1e-2, param_groups=[NNParamGroupSpec("*.lora_B", lr=1e-3)])
    model = NNModel(module=net, params=NNModelParams(loss=Losses.CROSS_ENTROPY))
    summary = summarize_model(model, optim=optim)
    rules = {p.name: p for p in summary.parameters}
    assert rules["0.lora_B"].lr == 1e-3
    assert rules["0.lora_A"].lr == 1e-2
    assert rules["0.base.weight"].frozen
    model.train(_train(runs_root, n_epochs=1, optim=optim))


def test_a_lora_run_resumes_bit_for_bit(runs_root):
    def model():
        net = _lora_net(dropout=0.2)  # dropout: the resumed RNG must be the same too
        return NNModel(module=net, params=NNModelParams(loss=Losses.CROSS_ENTROPY))

    full = model()
    full.train(_train(runs_root, n_epochs=4))
    first = model().train(_train(runs_root, n_epochs=2))
    resumed = model()
    resumed.train(_train(runs_root, n_epochs=2, resume_from_run_id=first.id))
    for (name, a), b in zip(
        full.net.state_dict().items(), resumed.net.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name
