"""Generation: the logits processors against hand-computed values, the KV cache against
the uncached forward, seeded sampling, and GenerativeNNModel after a reload."""

from __future__ import annotations

import math

import pytest
import torch

from nnx_lab import Checkpoints, ConfigError, Nets, NNCheckpoint, NNModelParams, NNTransformerParams
from nnx_lab.engine.nets_transformer import TransformerNN
from nnx_lab.lm_tasks import (
    GenerativeNNModel,
    KVCache,
    LogitsChain,
    RepetitionPenalty,
    TemperatureScaling,
    TopKFilter,
    TopPFilter,
    generate,
    generate_details,
)

V = 13
P = NNTransformerParams(vocab_size=V, n_layers=2, d_model=16, n_heads=2, max_seq_len=12)
INF = -math.inf


def _net(seed=0):
    torch.manual_seed(seed)
    net = TransformerNN(P).eval()
    with torch.no_grad():  # the tied embedding's N(0, 1) init makes every logit the input's
        net.embed.weight.mul_(0.1)
    return net


def test_the_processors_compute_what_they_say():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0]])
    ids = torch.tensor([[0, 3, 3]])
    assert torch.equal(TemperatureScaling(0.5)(logits, ids), logits * 2)
    assert torch.equal(TopKFilter(2)(logits, ids), torch.tensor([[2.0, 1.0, INF, INF]]))
    assert torch.equal(TopKFilter(10)(logits, ids), logits)
    p = torch.softmax(logits, -1)[0]  # 0.61, 0.22, 0.14, 0.03
    assert float(p[0]) < 0.7 < float(p[0] + p[1])
    assert torch.equal(TopPFilter(0.7)(logits, ids), torch.tensor([[2.0, 1.0, INF, INF]]))
    assert torch.equal(TopPFilter(0.5)(logits, ids), torch.tensor([[2.0, INF, INF, INF]]))
    shuffled = logits[:, [2, 0, 3, 1]]  # the nucleus follows the values, not the order
    assert torch.equal(TopPFilter(0.7)(shuffled, ids), torch.tensor([[INF, 2.0, INF, 1.0]]))
    assert torch.equal(RepetitionPenalty(2.0)(logits, ids), torch.tensor([[1.0, 1.0, 0.5, -2.0]]))
    chain = LogitsChain(TemperatureScaling(0.5), TopKFilter(1))
    assert torch.equal(chain(logits, ids), torch.tensor([[4.0, INF, INF, INF]]))
    built = LogitsChain.build(temperature=0.8, top_k=5, top_p=0.9, repetition_penalty=1.1)
    assert [type(x) for x in built] == [
        RepetitionPenalty,
        TemperatureScaling,
        TopKFilter,
        TopPFilter,
    ]
    for bad in (
        lambda: TemperatureScaling(0),
        lambda: TopKFilter(0),
        lambda: TopPFilter(1.5),
        lambda: RepetitionPenalty(0.5),
        lambda: LogitsChain(3),
    ):
        with pytest.raises(ConfigError):
            bad()


def test_the_forward_without_a_cache_is_unchanged_and_the_cache_matches_it():
    net = _net()
    ids = torch.randint(0, V, (3, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        full = net(ids)
        cache = KVCache()
        prefix = net(ids[:, :4], cache=cache)
        steps = [net(ids[:, t : t + 1], cache=cache) for t in range(4, 7)]
        chunk = net(ids[:, 7:], cache=cache)  # several new tokens at once: masked causally
    assert cache.length == 10
    got = torch.cat([prefix, *steps, chunk], dim=1)
    torch.testing.assert_close(got, full, rtol=1e-5, atol=1e-5)
    with pytest.raises(Exception, match="max_seq_len=12"):
        net(ids[:, :3], cache=cache)


def test_cached_and_uncached_greedy_generation_give_the_same_tokens():
    net = _net(1)
    prompt = [1, 2, 3]
    # 20 new tokens pass max_seq_len=12: the context is cropped on both paths
    # the penalty keeps an untrained net from repeating one token, so positions matter
    kw = {"temperature": 0, "repetition_penalty": 50.0}
    cached = generate(net, prompt, 20, use_cache=True, **kw)
    plain = generate(net, prompt, 20, use_cache=False, **kw)
    assert cached.shape == (1, 23)
    assert torch.equal(cached, plain)
    assert torch.equal(cached[0, :3], torch.tensor(prompt))
    assert len(set(cached[0, 3:].tolist())) >= 4  # not one token repeated


def test_seeded_sampling_is_reproducible_and_leaves_every_other_generator_alone():
    net = _net(2)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    loader_gen = torch.Generator().manual_seed(7)
    loader_state = loader_gen.get_state()
    a = generate_details(net, [[4, 5]], 8, temperature=1.5, top_k=6, seed=5, n=3)
    b = generate_details(net, [[4, 5]], 8, temperature=1.5, top_k=6, seed=5, n=3)
    c = generate(
        net, [[4, 5]], 8, temperature=1.5, top_k=6, generator=torch.Generator().manual_seed(6)
    )
    assert torch.equal(a.ids, b.ids)
    assert not torch.equal(a.ids[:1], c)
    assert a.ids.shape == (3, 10)
    assert len({tuple(r.tolist()) for r in a.new}) > 1  # n draws differ from each other
    assert torch.equal(torch.get_rng_state(), before)
    assert torch.equal(loader_gen.get_state(), loader_state)
    # each drawn token's probability, and only the top-k can be drawn
    assert bool((a.probs > 0).all())
    assert a.top_ids.shape == (3, 8, 5)
    net.train()
    generate(net, [1], 2)
    assert net.training  # put back as it was


def test_eos_stops_rows_and_bad_requests_are_refused():
    net = _net(3)
    first = int(generate(net, [1, 2], 1, temperature=0)[0, -1])
    out = generate(net, [[1, 2], [1, 2]], 5, temperature=0, eos_id=first)
    assert out.shape == (2, 3)  # every row drew eos at once: the loop stops
    with pytest.raises(ConfigError, match="max_new_tokens"):
        generate(net, [1], -1)
    with pytest.raises(ConfigError, match="temperature"):
        generate(net, [1], 2, temperature=-1)
    with pytest.raises(Exception, match=r"\[0, 13\)"):
        generate(net, [V], 2)
    with pytest.raises(ConfigError, match="use_cache"):
        generate(
            torch.nn.Sequential(torch.nn.Embedding(V, 4), torch.nn.Linear(4, V)),
            [1],
            2,
            use_cache=True,
        )


def test_a_generative_model_trains_reloads_and_writes(runs_root):
    from torch.utils.data import DataLoader, TensorDataset

    from nnx_lab import NNOptimParams, NNTrainParams
    from nnx_lab.lm_tasks import CausalLMTask

    ids = (torch.arange(9)[None] + torch.arange(24)[:, None]) % V  # next = last + 1
    model = GenerativeNNModel(P, NNModelParams(net=Nets.TRANSFORMER))
    task = CausalLMTask(V)
    run = model.train(
        NNTrainParams(
            n_epochs=12,
            train_loader=DataLoader(TensorDataset(ids), batch_size=8),
            optim=NNOptimParams(max_lr=0.05),
            runs_root=runs_root,
            progress=False,
            checkpoint_every_s=0,
        ),
        objective=task.objective(),
    )
    out = model.generate([3, 4, 5], 4, temperature=0)
    assert out[0].tolist() == [3, 4, 5, 6, 7, 8, 9]
    again = GenerativeNNModel.from_checkpoint(NNCheckpoint.load(run, Checkpoints.LAST, runs_root))
    assert isinstance(again, GenerativeNNModel)
    assert torch.equal(again.generate([3, 4, 5], 4, temperature=0), out)
    assert GenerativeNNModel.of(model).net is model.net


def _old_forward(net, ids):
    """TransformerNN's forward as it was before the cache, written out."""
    import torch.nn.functional as F

    def rope(x, base):
        t, d = x.shape[-2], x.shape[-1]
        inv = base ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
        angles = torch.arange(t, dtype=torch.float32)[:, None] * inv[None, :]
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)

    x = net.embed(ids)
    for block in net.blocks:
        a = block.attn
        h = block.norm1(x)
        n, t, d = h.shape
        q, k, v = a.qkv(h).view(n, t, 3, a.n_heads, d // a.n_heads).permute(2, 0, 3, 1, 4)
        q, k = rope(q, a.rope), rope(k, a.rope)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + a.out(y.transpose(1, 2).reshape(n, t, d))
        x = x + block.mlp(block.norm2(x))
    return net.head(net.norm(x))


def test_the_uncached_forward_is_bit_identical_to_the_one_before_the_cache():
    net = _net(4)
    ids = torch.randint(0, V, (2, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(net(ids), _old_forward(net, ids))
