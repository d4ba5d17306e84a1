"""Nets.TRANSFORMER, Nets.VIT and Nets.FEED_FWD_MOE: each builds from its own params
class (and refuses another), trains, enters the run id, checkpoints and rebuilds."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    Checkpoints,
    ConfigError,
    DataError,
    Losses,
    Nets,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNMoEParams,
    NNOptimParams,
    NNParams,
    NNRun,
    NNTrainParams,
    NNTransformerParams,
    NNViTParams,
)

LM = NNTransformerParams(vocab_size=16, n_layers=1, d_model=16, n_heads=2, max_seq_len=12)
VIT = NNViTParams(output_dim=10, image_size=8, patch_size=4, in_channels=1, d_model=16, n_heads=2)
MOE = NNMoEParams(input_dim=6, output_dim=3, num_experts=3, top_k=2, hidden_dim=8, expert_dim=8)


def next_token_loss(out, y):
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def _tokens(n=32, t=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, 16, (n, 1), generator=g)
    ids = (start + torch.arange(t)) % 16  # each next token is the last one + 1
    return ids[:, :-1], ids[:, 1:]


def _train(root, loader, n_epochs=2, val=None):
    return NNTrainParams(
        n_epochs=n_epochs,
        train_loader=loader,
        val_loader=val,
        optim=NNOptimParams(max_lr=0.01),
        runs_root=root,
        checkpoint_every_s=0,
    )


def _lm():
    return NNModel(LM, NNModelParams(net=Nets.TRANSFORMER, loss=next_token_loss))


def test_the_transformer_trains_on_next_tokens_saves_and_reloads(runs_root):
    X, y = _tokens()
    loader = DataLoader(TensorDataset(X, y), batch_size=8)
    model = _lm()
    run = model.train(_train(runs_root, loader, 3))
    losses = [p.train_edp.loss for p in run.idps]
    assert losses[-1] < losses[0]
    assert run.config["net"] == LM.to_json()
    assert NNRun.load(run.id, runs_root=runs_root).net_params == LM
    ckpt = NNCheckpoint.load(run, Checkpoints.LAST, runs_root)
    rebuilt = NNModel.from_checkpoint(ckpt, loss=next_token_loss)
    assert rebuilt.net.head.weight is rebuilt.net.embed.weight  # tied, after the reload too
    with torch.no_grad():
        assert torch.equal(rebuilt.net(X[:4]), model.net(X[:4]))


def test_the_transformer_refuses_tokens_it_cannot_take(runs_root):
    X, y = _tokens(t=20)  # 19 tokens per row > max_seq_len=12
    with pytest.raises(DataError, match="max_seq_len=12"):
        _lm().train(_train(runs_root, [(X, y)], 1))
    with pytest.raises(DataError, match="int64 token ids"):
        _lm().train(_train(runs_root, [(X[:, :8].float(), y[:, :8])], 1))
    with pytest.raises(DataError, match=r"\[0, 16\)"):
        _lm().train(_train(runs_root, [(X[:, :8] + 16, y[:, :8])], 1))
    assert not runs_root.exists() or not any(runs_root.iterdir())


def test_transformer_params_are_checked():
    with pytest.raises(ConfigError) as info:
        NNTransformerParams(vocab_size=16, d_model=30, n_heads=4)
    assert info.value.field == "NNTransformerParams.n_heads"
    with pytest.raises(ConfigError) as info:
        NNTransformerParams(vocab_size=0)
    assert info.value.field == "NNTransformerParams.vocab_size"
    with pytest.raises(ConfigError) as info:
        NNViTParams(output_dim=10, image_size=28, patch_size=5)
    assert info.value.field == "NNViTParams.patch_size"
    with pytest.raises(ConfigError) as info:
        NNMoEParams(input_dim=4, output_dim=2, num_experts=1)
    assert info.value.field == "NNMoEParams.num_experts"
    with pytest.raises(ConfigError) as info:
        NNMoEParams(input_dim=4, output_dim=2, num_experts=2, top_k=3)
    assert info.value.field == "NNMoEParams.top_k"


@pytest.mark.parametrize(
    ("kind", "wrong", "right"),
    [
        (Nets.TRANSFORMER, NNParams(input_dim=4, output_dim=2), "NNTransformerParams"),
        (Nets.VIT, LM, "NNViTParams"),
        (Nets.FEED_FWD_MOE, NNParams(input_dim=4, output_dim=2), "NNMoEParams"),
        (Nets.FEED_FWD, MOE, "NNParams"),
    ],
)
def test_each_member_refuses_another_params_class(kind, wrong, right):
    with pytest.raises(ConfigError, match=f"Nets.{kind.name} takes {right}"):
        NNModel(wrong, NNModelParams(net=kind))


def test_the_vit_trains_on_images_and_rebuilds(runs_root):
    from nnx_lab.example_data import digits_images

    X, y = digits_images()
    loader = DataLoader(TensorDataset(X[:128], y[:128]), batch_size=32)
    model = NNModel(VIT, NNModelParams(net=Nets.VIT, loss=Losses.CROSS_ENTROPY))
    run = model.train(_train(runs_root, loader, 2, val=loader))
    assert run.status.value == "finished"
    assert model.predict(X[:5]).logits.shape == (5, 10)
    rebuilt = NNModel.from_checkpoint(NNCheckpoint.load(run, Checkpoints.LAST, runs_root))
    assert torch.equal(rebuilt.predict(X[:5]).logits, model.predict(X[:5]).logits)
    other = NNViTParams(output_dim=10, image_size=8, patch_size=2, d_model=16, n_heads=2)
    assert model.expected_run_id(_train(runs_root, loader)) != NNModel(
        other, NNModelParams(net=Nets.VIT)
    ).expected_run_id(_train(runs_root, loader))


def test_the_moe_routes_trains_with_its_balance_term_and_rebuilds(runs_root):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(96, 6, generator=g)
    y = (X[:, 0] > 0).long() + (X[:, 1] > 0).long()
    loader = DataLoader(TensorDataset(X, y), batch_size=32)
    model = NNModel(MOE, NNModelParams(net=Nets.FEED_FWD_MOE, loss=Losses.CROSS_ENTROPY))
    with torch.no_grad():
        model.net(X)
    term = float(model.net.load_balance_loss)
    assert term >= 1.0 - 1e-6  # 1.0 is perfectly balanced, more is less
    run = model.train(_train(runs_root, loader, 2))
    assert run.status.value == "finished"
    rebuilt = NNModel.from_checkpoint(NNCheckpoint.load(run, Checkpoints.LAST, runs_root))
    assert torch.equal(rebuilt.predict(X).logits, model.predict(X).logits)


def test_the_balance_term_is_handed_to_the_step_after_a_training_forward_only():
    torch.manual_seed(0)
    net = NNModel(MOE, NNModelParams(net=Nets.FEED_FWD_MOE)).net
    X = torch.randn(16, 6)
    net.train()
    net(X)
    term = net.auxiliary_loss()
    assert (term.name, term.weight) == ("load_balance", MOE.load_balance_coef)
    (grad,) = torch.autograd.grad(term.value, [net.layers[0].router.weight])
    assert grad.abs().sum() > 0  # the term reaches the router (test_moe_aux_term: the scale)
    assert torch.equal(term.value.detach(), net.load_balance_loss)
    net.eval()
    with torch.no_grad():
        net(X)
    assert net.auxiliary_loss() is None  # an evaluation forward trains on nothing
