"""CausalLMTask: the token-weighted objective and the evaluator against hand-written
token cross-entropy, on uneven, padded and masked batches."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from nnx_lab import ConfigError, DataError, NNTransformerParams
from nnx_lab.engine.nets_transformer import TransformerNN
from nnx_lab.engine.objective import ObjectiveContext
from nnx_lab.lm_tasks import CausalLMTask

V = 11
PAD = 0


def _net(seed=0):
    torch.manual_seed(seed)
    return TransformerNN(NNTransformerParams(vocab_size=V, n_layers=1, d_model=16, n_heads=2))


def _ctx(micro=0, window=1):
    return ObjectiveContext(1, 0, micro, window, None, torch.device("cpu"), None)


def _ids(n, t, seed, pad_from=None):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, V, (n, t), generator=g)
    if pad_from is not None:
        for row, start in enumerate(pad_from):
            ids[row, start:] = PAD
    return ids


def _reference(net, ids, mask=None, smoothing=0.0):
    """Σ CE over the valid next tokens, and their count, written out by hand."""
    logits = net(ids[:, :-1])
    total, count = torch.zeros(()), 0
    for r in range(ids.shape[0]):
        for t in range(ids.shape[1] - 1):
            target = int(ids[r, t + 1])
            if target == PAD or (mask is not None and not mask[r, t + 1]):
                continue
            total = total + F.cross_entropy(
                logits[r, t][None], torch.tensor([target]), label_smoothing=smoothing
            )
            count += 1
    return total, count


def test_the_objective_is_the_token_mean_over_valid_tokens():
    net = _net()
    task = CausalLMTask(V, pad_id=PAD)
    ids = _ids(3, 9, 0, pad_from=[9, 4, 6])  # uneven rows of padding
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[0, 2:5] = False  # a prompt the loss skips
    term = task.objective()(net, (ids, mask), _ctx()).terms[0]
    total, count = _reference(net, ids, mask)
    assert term.name == "token_ce"
    assert term.reduction == "mean"
    assert int(term.denominator) == count == 8 + 3 + 5 - 3
    torch.testing.assert_close(term.numerator, total, rtol=1e-6, atol=1e-6)


def test_label_smoothing_enters_training_and_ignore_ids_are_skipped():
    net = _net()
    ids = _ids(2, 7, 1)
    targets = ids[:, 1:].clone()
    targets[1, :3] = -100
    task = CausalLMTask(V, alignment="pre_shifted", smoothing=0.1)
    term = task.objective()(net, (ids[:, :-1], targets), _ctx()).terms[0]
    logits = net(ids[:, :-1]).reshape(-1, V)
    ref = F.cross_entropy(logits, targets.reshape(-1), label_smoothing=0.1, reduction="sum")
    assert int(term.denominator) == 12 - 3
    torch.testing.assert_close(term.numerator, ref, rtol=1e-6, atol=1e-6)


def test_two_micro_batches_accumulate_as_their_union_of_tokens():
    """The window's loss Σ numerator / Σ denominator is the mean over every valid token
    of both batches, not the mean of the two batch means (which weighs the short one up)."""
    net = _net()
    task = CausalLMTask(V, pad_id=PAD)
    a = _ids(2, 9, 2, pad_from=[9, 9])  # 16 valid tokens
    b = _ids(2, 9, 3, pad_from=[3, 2])  # 2 + 1 valid tokens
    terms = [task.objective()(net, x, _ctx(i, 2)).terms[0] for i, x in enumerate((a, b))]
    window = (terms[0].numerator + terms[1].numerator) / (
        terms[0].denominator + terms[1].denominator
    )
    window.backward()
    ours = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    both = torch.cat([a, b])
    logits = net(both[:, :-1])
    tgt = both[:, 1:].masked_fill(both[:, 1:] == PAD, -100)
    ref = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1), ignore_index=-100)
    ref.backward()
    torch.testing.assert_close(window, ref)
    for mine, theirs in zip(ours, (p.grad for p in net.parameters()), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-7)
    per_batch = (terms[0].numerator / terms[0].denominator + terms[1].numerator / 3) / 2
    assert not torch.allclose(per_batch, ref)  # the case the token weighting exists for


class _Ctx:
    def __init__(self, model, loader):
        self.model, self.val_loader = model, loader
        self.device, self.precision = torch.device("cpu"), None


def test_the_evaluator_reports_nll_perplexity_and_token_accuracy_only():
    net = _net().eval()
    task = CausalLMTask(V, pad_id=PAD, smoothing=0.2)  # smoothing never enters evaluation
    loader = [_ids(2, 8, 4, pad_from=[8, 5]), _ids(3, 8, 5, pad_from=[2, 8, 7])]
    with torch.no_grad():
        edp = task.eval_step()(_Ctx(net, loader))
        nll, hits, count = 0.0, 0, 0
        for ids in loader:
            logits = net(ids[:, :-1])
            tgt = ids[:, 1:]
            ok = tgt != PAD
            nll += float(F.cross_entropy(logits[ok], tgt[ok], reduction="sum"))
            hits += int((logits.argmax(-1)[ok] == tgt[ok]).sum())
            count += int(ok.sum())
    assert edp.valid == count
    assert edp.samples == 5
    assert edp.loss == pytest.approx(nll / count, rel=1e-6)
    # perplexity is exp of that mean: its relative error is the mean's absolute one
    # (about 13 here), so it is held to the evaluator's own mean, and to the hand one
    # within what the float32 sums leave
    assert edp.metrics["perplexity"] == pytest.approx(math.exp(edp.loss), rel=1e-9)
    assert edp.metrics["perplexity"] == pytest.approx(math.exp(nll / count), rel=2e-5)
    assert edp.accuracy == edp.metrics["token_accuracy"] == pytest.approx(hits / count)
    assert edp.precision is None
    assert edp.recall is None
    assert edp.f1 is None


def test_arguments_are_refused_naming_the_field():
    cases = [
        ({"vocab_size": 1}, "CausalLMTask.vocab_size"),
        ({"vocab_size": V, "alignment": "left"}, "CausalLMTask.alignment"),
        ({"vocab_size": V, "ignore_id": 3}, "CausalLMTask.ignore_id"),
        ({"vocab_size": V, "pad_id": V}, "CausalLMTask.pad_id"),
        ({"vocab_size": V, "smoothing": 1.0}, "CausalLMTask.smoothing"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ConfigError) as info:
            CausalLMTask(**kwargs)
        assert info.value.field == field
    with pytest.raises(ConfigError, match="token_accuracy"):
        CausalLMTask(V).monitor("f1")


def test_batches_are_checked_before_any_forward():
    task = CausalLMTask(V)
    with pytest.raises(DataError, match=r"token id 11, outside the vocabulary \[0, 11\)"):
        task.check_batch(torch.full((2, 5), V), "batch")
    with pytest.raises(DataError, match="int64 token ids"):
        task.check_batch(torch.zeros(2, 5), "batch")
    with pytest.raises(DataError, match="loss mask of the ids' shape"):
        task.check_batch((torch.zeros(2, 5, dtype=torch.long), torch.ones(2, 4)), "batch")
    pre = CausalLMTask(V, alignment="pre_shifted")
    with pytest.raises(DataError, match="pre_shifted"):
        pre.check_batch(torch.zeros(2, 5, dtype=torch.long), "batch")
    x = torch.zeros(2, 5, dtype=torch.long)
    pre.check_batch((x, x.masked_fill(x == 0, -100)), "batch")  # ignore ids are targets
    with pytest.raises(DataError, match="token id -100"):
        task.check_batch(x - 100, "batch")  # but never inputs
