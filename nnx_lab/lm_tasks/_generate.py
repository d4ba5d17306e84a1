"""Generation: ``generate(net, prompt_ids, ...)`` and ``GenerativeNNModel``.

Each step runs the network on the new token (with a ``KVCache`` for the built-in
transformer) or on the whole context (any other causal network), sends the last
position's logits through the ``LogitsChain`` and draws the next token from its own
``torch.Generator``: sampling never reads or advances the global RNG or a training
loader's generator, and the same seed gives the same tokens. Greedy decoding is
``temperature=0``. The network runs in eval mode and is put back as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..engine.model import NNModel
from ..engine.nets_transformer import KVCache, TransformerNN
from ..errors import ConfigError, DataError
from ._logits import LogitsChain, chain_of

__all__ = ["Generation", "GenerativeNNModel", "generate", "generate_details"]


@dataclass(frozen=True)
class Generation:
    """What a generation drew: ``ids`` (prompt + new tokens, ``(N, T + new)``), the
    ``new`` tokens ``(N, new)``, ``probs`` (each drawn token's probability under the
    processed distribution, ``(N, new)``), and ``top`` (per step, the 5 most likely
    tokens and their probabilities: ``(N, new, 5)`` ids and probabilities)."""

    ids: torch.Tensor
    new: torch.Tensor
    probs: torch.Tensor
    top_ids: torch.Tensor
    top_probs: torch.Tensor


def _prompt(prompt_ids: Any, n: int, device: torch.device) -> torch.Tensor:
    ids = torch.as_tensor(prompt_ids, dtype=torch.long)
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.shape[1] == 0:
        raise DataError(
            "generate(prompt_ids)",
            f"a prompt of shape {tuple(ids.shape)}",
            "pass a non-empty list of token ids or a (rows, tokens) tensor",
        )
    if n != 1:
        ids = ids.repeat_interleave(n, dim=0)
    return ids.to(device)


def _vocab_check(ids: torch.Tensor, vocab: int | None) -> None:
    if vocab is not None and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        raise DataError(
            "generate(prompt_ids)",
            f"token ids span [{int(ids.min())}, {int(ids.max())}]",
            f"ids must be in [0, {vocab}) (the network's vocabulary)",
        )


def _settings(max_new_tokens: Any, temperature: Any, n: Any) -> None:
    for name, value, low in (("max_new_tokens", max_new_tokens, 0), ("n", n, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"generate({name})", value, f"an int >= {low}")
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or temperature < 0:
        raise ConfigError("generate(temperature)", temperature, "a number >= 0 (0: greedy)")


def generate_details(
    net: torch.nn.Module,
    prompt_ids: Any,
    max_new_tokens: int = 32,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    repetition_penalty: float | None = None,
    *,
    generator: torch.Generator | None = None,
    seed: int = 0,
    n: int = 1,
    eos_id: int | None = None,
    use_cache: bool | None = None,
    logits_chain: LogitsChain | Sequence[Any] | None = None,
) -> Generation:
    """Continue ``prompt_ids`` by ``max_new_tokens`` tokens (``n`` draws per prompt row).

    ``generator`` draws the tokens (else a fresh one seeded with ``seed``);
    ``logits_chain`` replaces the chain the four settings build; ``use_cache`` (None:
    when the network is the built-in transformer) feeds one token per step; a row that
    drew ``eos_id`` repeats it to the end and the loop stops when every row has.
    """
    _settings(max_new_tokens, temperature, n)
    if use_cache and not isinstance(net, TransformerNN):
        raise ConfigError(
            "generate(use_cache)",
            use_cache,
            f"the KV cache is the built-in TransformerNN's; {type(net).__name__} runs "
            "uncached (use_cache=None or False)",
        )
    cached = isinstance(net, TransformerNN) if use_cache is None else bool(use_cache)
    chain = (
        chain_of(logits_chain)
        if logits_chain is not None
        else LogitsChain.build(
            temperature if temperature > 0 else 1.0, top_k, top_p, repetition_penalty
        )
    )
    device = next(net.parameters()).device
    ids = _prompt(prompt_ids, n, device)
    embed = getattr(net, "embed", None)
    _vocab_check(ids, embed.num_embeddings if isinstance(embed, torch.nn.Embedding) else None)
    limit = getattr(net, "max_seq_len", None)
    if generator is None:
        generator = torch.Generator(device=device).manual_seed(seed)
    was_training = net.training
    net.eval()
    new, probs, top_ids, top_probs = [], [], [], []
    done = torch.zeros(ids.shape[0], dtype=torch.bool, device=device)
    cache = KVCache() if cached else None
    try:
        with torch.no_grad():
            for _ in range(max_new_tokens):
                logits, cache = _next_logits(net, ids, cache, limit)
                p = torch.softmax(chain(logits.float(), ids), dim=-1)
                if temperature == 0:
                    token = p.argmax(-1, keepdim=True)
                else:
                    g_dev = generator.device
                    token = torch.multinomial(p.to(g_dev), 1, generator=generator).to(device)
                if eos_id is not None:
                    token = torch.where(done[:, None], torch.full_like(token, eos_id), token)
                    done |= token[:, 0] == eos_id
                k = min(5, p.shape[-1])
                top = torch.topk(p, k, dim=-1)
                new.append(token)
                probs.append(p.gather(-1, token))
                top_ids.append(top.indices[:, None])
                top_probs.append(top.values[:, None])
                ids = torch.cat((ids, token), dim=1)
                if eos_id is not None and bool(done.all()):
                    break
    finally:
        net.train(was_training)
    rows = ids.shape[0]
    if not new:
        empty = torch.zeros(rows, 0, dtype=torch.long, device=device)
        none = torch.zeros(rows, 0, device=device)
        return Generation(ids, empty, none, empty[..., None], none[..., None])
    return Generation(
        ids,
        torch.cat(new, dim=1),
        torch.cat(probs, dim=1),
        torch.cat(top_ids, dim=1),
        torch.cat(top_probs, dim=1),
    )


def _next_logits(
    net: torch.nn.Module, ids: torch.Tensor, cache: KVCache | None, limit: int | None
) -> tuple[torch.Tensor, KVCache | None]:
    """The last position's logits ``(N, V)``, and the cache to use next."""
    if cache is None:
        context = ids if limit is None else ids[:, -limit:]
        return net(context)[:, -1], None
    if cache.length == 0 or cache.length >= (limit or cache.length + 1):
        # a full cache cannot take another position: start again on the cropped context
        # (rotary positions are relative, so this is what the uncached path computes)
        cache = KVCache()
        context = ids if limit is None else ids[:, -limit:]
        return net(context, cache=cache)[:, -1], cache
    return net(ids[:, -1:], cache=cache)[:, -1], cache


def generate(
    net: torch.nn.Module, prompt_ids: Any, max_new_tokens: int = 32, **kwargs: Any
) -> torch.Tensor:
    """``generate_details(...).ids``: the prompt and its continuation ``(N, T + new)``."""
    return generate_details(net, prompt_ids, max_new_tokens, **kwargs).ids


class GenerativeNNModel(NNModel):
    """An ``NNModel`` of a causal language model that also writes: ``generate`` and
    ``generate_details`` run on its network (trained, reloaded with
    ``GenerativeNNModel.from_checkpoint``, or wrapped: ``GenerativeNNModel.of(model)``)."""

    @classmethod
    def of(cls, model: NNModel) -> GenerativeNNModel:
        """The same model (its network, params and device shared, not copied) with
        generation."""
        if isinstance(model, GenerativeNNModel):
            return model
        if not isinstance(model, NNModel):
            raise ConfigError("GenerativeNNModel.of(model)", model, "pass an NNModel")
        out = cls.__new__(cls)
        out.__dict__.update(model.__dict__)
        return out

    def generate(
        self,
        prompt_ids: Any,
        max_new_tokens: int = 32,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        repetition_penalty: float | None = None,
        *,
        generator: torch.Generator | None = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        """The prompt and ``max_new_tokens`` drawn tokens, ``(N, T + new)`` (see
        ``nnx_lab.lm_tasks.generate_details`` for ``seed``, ``n``, ``eos_id``,
        ``use_cache`` and ``logits_chain``)."""
        return self.generate_details(
            prompt_ids,
            max_new_tokens,
            temperature,
            top_k,
            top_p,
            repetition_penalty,
            generator=generator,
            **kwargs,
        ).ids

    def generate_details(
        self, prompt_ids: Any, max_new_tokens: int = 32, *args: Any, **kwargs: Any
    ) -> Generation:
        return generate_details(self.net, prompt_ids, max_new_tokens, *args, **kwargs)
