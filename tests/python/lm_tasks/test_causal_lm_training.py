"""CausalLMTask through NNModel.train: exact token-weighted accumulation, the evaluator
and the monitor in the run, and refusals before any run directory exists."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    ConfigError,
    DataError,
    Nets,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNRun,
    NNTrainParams,
    NNTransformerParams,
)
from nnx_lab.lm_tasks import CausalLMTask

V, PAD = 11, 0
NET = NNTransformerParams(vocab_size=V, n_layers=1, d_model=16, n_heads=2, max_seq_len=16)


def _model():
    return NNModel(NET, NNModelParams(net=Nets.TRANSFORMER))


def _params(root, loader, val=None, **kw):
    return NNTrainParams(
        n_epochs=kw.pop("n_epochs", 1),
        train_loader=loader,
        val_loader=val,
        optim=kw.pop("optim", NNOptimParams(max_lr=0.01)),
        runs_root=root,
        checkpoint_every_s=0,
        progress=False,
        **kw,
    )


def _ids(n, t, seed, pad_from=None):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, V, (n, t), generator=g)
    for row, start in enumerate(pad_from or []):
        ids[row, start:] = PAD
    return ids


def test_an_update_over_two_uneven_micro_batches_is_the_union_token_mean(runs_root):
    a = _ids(2, 9, 0)  # 16 valid targets
    b = _ids(2, 9, 1, pad_from=[3, 2])  # 3 valid targets
    model = _model()
    start = copy.deepcopy(model.net)
    task = CausalLMTask(V, pad_id=PAD)
    sgd = NNOptimParams(name="sgd", max_lr=0.5, momentum=0.0)
    model.train(
        _params(runs_root, [a, b], accumulation_steps=2, optim=sgd), objective=task.objective()
    )
    both = torch.cat([a, b])
    tgt = both[:, 1:].masked_fill(both[:, 1:] == PAD, -100)
    loss = F.cross_entropy(start(both[:, :-1]).reshape(-1, V), tgt.reshape(-1))
    loss.backward()
    with torch.no_grad():
        for p in start.parameters():
            p -= 0.5 * p.grad
    for (name, mine), theirs in zip(
        model.net.state_dict().items(), start.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6, msg=name)


def test_a_run_records_perplexity_and_selects_on_it(runs_root):
    ids = _ids(48, 13, 2)
    train = DataLoader(TensorDataset(ids[:40]), batch_size=8)
    val = DataLoader(TensorDataset(ids[40:]), batch_size=8)
    task = CausalLMTask(V)
    run = _model().train(
        _params(runs_root, train, val, n_epochs=2, monitor=task.monitor("perplexity")),
        objective=task.objective(),
        eval_step_fn=task.eval_step(),
    )
    ends = [p for p in run.idps if p.val_edp is not None]
    assert len(ends) == 2
    for p in ends:
        assert p.val_edp.metrics["perplexity"] == pytest.approx(torch.tensor(p.val_edp.loss).exp())
        assert p.val_edp.valid == 8 * 12
        assert p.selection.metric == "perplexity"
    assert ends[-1].val_edp.loss < ends[0].val_edp.loss
    assert NNRun.load(run.id, runs_root=runs_root).config["objective"]["config"] == task.config()


def test_pre_shifted_pairs_train_as_the_step_reads_them(runs_root):
    ids = _ids(16, 9, 3)
    pairs = DataLoader(TensorDataset(ids[:, :-1], ids[:, 1:]), batch_size=8)
    task = CausalLMTask(V, alignment="pre_shifted")
    run = _model().train(
        _params(runs_root, pairs, pairs), objective=task.objective(), eval_step_fn=task.eval_step()
    )
    assert run.idps[-1].val_edp.valid == 16 * 8


def test_a_vocabulary_mismatch_or_a_bad_batch_is_refused_before_any_run(runs_root):
    ok = [_ids(2, 9, 4)]
    with pytest.raises(ConfigError) as info:
        _model().train(_params(runs_root, ok), objective=CausalLMTask(V + 1).objective())
    assert info.value.field == "CausalLMTask.vocab_size"
    assert "vocab_size=11" in str(info.value)
    bad = [torch.full((2, 9), 12)]
    with pytest.raises(DataError, match="token id 12, outside the vocabulary"):
        _model().train(
            _params(runs_root, ok, bad),
            objective=CausalLMTask(V).objective(),
            eval_step_fn=CausalLMTask(V).eval_step(),
        )
    assert not runs_root.exists() or not any(runs_root.iterdir())
