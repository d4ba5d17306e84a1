"""A corpus the package writes itself, and the windows and loaders a model trains on.

``toy_corpus(n, seed=0, kind="grammar")`` writes ``n`` sentences of a small English-like
grammar (``"the small cat sees a red ball."``: determiner, optional adjective, noun, verb,
object, sometimes a place); ``kind="arithmetic"`` writes sums (``"12+7=19."``), whose
answers a model can only get right by learning to add. Both are seeded: the same
arguments give the same sentences on every machine, with no download.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from ..errors import ConfigError, DataError
from ._tokenizer import CharTokenizer

__all__ = ["lm_loaders", "token_windows", "toy_corpus"]

_DET = ("the", "a")
_ADJ = ("small", "big", "red", "old", "happy", "quiet")
_SUBJ = ("cat", "dog", "bird", "child", "robot", "teacher")
_VERB = ("sees", "likes", "follows", "finds", "draws", "holds")
_OBJ = ("ball", "tree", "book", "fish", "house", "star")
_PLACE = ("in the park", "at home", "by the river", "on the hill")
_KINDS = ("grammar", "arithmetic")


def _noun_phrase(rng: random.Random, nouns: Sequence[str]) -> str:
    words = [rng.choice(_DET)]
    if rng.random() < 0.5:
        words.append(rng.choice(_ADJ))
    words.append(rng.choice(nouns))
    return " ".join(words)


def _sentence(rng: random.Random) -> str:
    text = f"{_noun_phrase(rng, _SUBJ)} {rng.choice(_VERB)} {_noun_phrase(rng, _OBJ)}"
    if rng.random() < 0.3:
        text += " " + rng.choice(_PLACE)
    return text + "."


def _sum(rng: random.Random) -> str:
    a, b = rng.randrange(100), rng.randrange(100)
    return f"{a}+{b}={a + b}."


def toy_corpus(n: int, seed: int = 0, kind: str = "grammar") -> list[str]:
    """``n`` seeded sentences of the toy grammar (or sums, ``kind="arithmetic"``)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError("toy_corpus(n)", n, "pass a number of sentences >= 1")
    if kind not in _KINDS:
        raise ConfigError("toy_corpus(kind)", kind, f"one of {list(_KINDS)}")
    rng = random.Random(seed)
    write = _sentence if kind == "grammar" else _sum
    return [write(rng) for _ in range(n)]


def token_windows(
    ids: Sequence[int] | torch.Tensor, length: int, stride: int | None = None
) -> torch.Tensor:
    """Windows of ``length`` consecutive ids from a token stream, ``(N, length)`` int64,
    every ``stride`` ids (default: ``length``, no overlap); a short tail is dropped.
    For ``alignment="shift_inputs"`` take ``length = max_seq_len + 1``."""
    stream = torch.as_tensor(ids, dtype=torch.long).reshape(-1)
    for name, value in (("length", length), ("stride", stride if stride is not None else 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"token_windows({name})", value, "pass an int >= 1")
    stride = length if stride is None else stride
    if stream.numel() < length:
        raise DataError(
            "token_windows(ids)",
            f"{stream.numel()} ids for windows of {length}",
            "pass a longer stream or a shorter length",
        )
    return stream.unfold(0, length, stride).contiguous()


def lm_loaders(
    texts: Sequence[str],
    tokenizer: CharTokenizer,
    length: int,
    batch_size: int = 32,
    val_fraction: float = 0.1,
    seed: int = 0,
) -> tuple[DataLoader[Any], DataLoader[Any] | None]:
    """(train, val) loaders of ``(ids,)`` windows for ``CausalLMTask("shift_inputs")``.

    The texts are split by sentence before tokenizing (the last ``val_fraction`` of
    them validate, so no window straddles the two), each ends with ``<eos>``, and each
    split is cut into windows of ``length`` ids. The training loader shuffles with its
    own generator seeded by ``seed``.
    """
    if not isinstance(val_fraction, int | float) or not 0.0 <= val_fraction < 1.0:
        raise ConfigError("lm_loaders(val_fraction)", val_fraction, "a fraction in [0, 1)")
    n_val = round(len(texts) * val_fraction)
    train_texts, val_texts = list(texts[: len(texts) - n_val]), list(texts[len(texts) - n_val :])

    def stream(part: list[str]) -> list[int]:
        return [i for text in part for i in tokenizer.encode(text, eos=True)]

    train = TensorDataset(token_windows(stream(train_texts), length))
    g = torch.Generator().manual_seed(seed)
    train_loader = DataLoader(train, batch_size=batch_size, shuffle=True, generator=g)
    if not n_val:
        return train_loader, None
    val = TensorDataset(token_windows(stream(val_texts), length))
    return train_loader, DataLoader(val, batch_size=batch_size)
