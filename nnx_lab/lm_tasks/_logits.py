"""The logits chain of generation: each step's next-token logits ``(N, V)`` go through
processors in order before a token is drawn.

``LogitsChain(RepetitionPenalty(1.2), TemperatureScaling(0.8), TopKFilter(20),
TopPFilter(0.9))`` is the order ``LogitsChain.build(...)`` uses (the penalty acts on the
raw logits, as CTRL defined it; the filters cut the tempered distribution). A
processor is any callable ``(logits, ids) -> logits``, ``ids`` the sequences so far
``(N, T)``; a filtered-out token gets ``-inf``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..errors import ConfigError

__all__ = [
    "LogitsChain",
    "RepetitionPenalty",
    "TemperatureScaling",
    "TopKFilter",
    "TopPFilter",
]

Processor = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _number(value: Any, field: str, ok: Callable[[float], bool], fix: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(field, value, fix)
    if not ok(float(value)):
        raise ConfigError(field, value, fix)
    return float(value)


class TemperatureScaling:
    """``logits / temperature``: below 1 sharpens, above 1 flattens (> 0; greedy
    decoding is ``temperature=0`` in ``generate``, not a processor)."""

    def __init__(self, temperature: float) -> None:
        self.temperature = _number(
            temperature, "TemperatureScaling.temperature", lambda t: t > 0, "a temperature > 0"
        )

    def __call__(self, logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return logits / self.temperature

    def __repr__(self) -> str:
        return f"TemperatureScaling({self.temperature})"


class TopKFilter:
    """Keep the ``k`` most likely tokens (ties at the k-th logit are kept)."""

    def __init__(self, k: int) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError("TopKFilter.k", k, "an int >= 1 (the tokens kept)")
        self.k = k

    def __call__(self, logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        k = min(self.k, logits.shape[-1])
        kth = torch.topk(logits, k, dim=-1).values[..., -1:]
        return logits.masked_fill(logits < kth, -math.inf)

    def __repr__(self) -> str:
        return f"TopKFilter({self.k})"


class TopPFilter:
    """Nucleus filtering: keep the most likely tokens whose probabilities first reach
    ``p`` in total (the most likely one always stays)."""

    def __init__(self, p: float) -> None:
        self.p = _number(p, "TopPFilter.p", lambda v: 0 < v <= 1, "a probability in (0, 1]")

    def __call__(self, logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        if self.p >= 1.0:
            return logits
        ordered, order = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(ordered.float(), dim=-1)
        # a token is dropped when the tokens before it already reach p
        before = torch.cumsum(probs, dim=-1) - probs
        drop = before >= self.p
        drop[..., 0] = False
        mask = torch.zeros_like(drop).scatter(-1, order, drop)
        return logits.masked_fill(mask, -math.inf)

    def __repr__(self) -> str:
        return f"TopPFilter({self.p})"


class RepetitionPenalty:
    """CTRL's penalty on every token already in the sequence (prompt included): a
    positive logit is divided by ``penalty``, a negative one multiplied (``>= 1``;
    1 leaves the logits as they are)."""

    def __init__(self, penalty: float) -> None:
        self.penalty = _number(
            penalty, "RepetitionPenalty.penalty", lambda v: v >= 1, "a penalty >= 1 (1: none)"
        )

    def __call__(self, logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        if self.penalty == 1.0 or ids.shape[-1] == 0:
            return logits
        seen = torch.gather(logits, -1, ids)
        seen = torch.where(seen > 0, seen / self.penalty, seen * self.penalty)
        return logits.scatter(-1, ids, seen)

    def __repr__(self) -> str:
        return f"RepetitionPenalty({self.penalty})"


class LogitsChain:
    """Processors applied in order: ``chain(logits, ids)``."""

    def __init__(self, *processors: Processor) -> None:
        for i, p in enumerate(processors):
            if not callable(p):
                raise ConfigError(
                    f"LogitsChain[{i}]", p, "a processor: a callable (logits, ids) -> logits"
                )
        self.processors: tuple[Processor, ...] = processors

    @classmethod
    def build(
        cls,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        repetition_penalty: float | None = None,
    ) -> LogitsChain:
        """The chain of ``generate``'s settings (a setting that changes nothing is left out)."""
        parts: list[Processor] = []
        if repetition_penalty is not None and repetition_penalty != 1.0:
            parts.append(RepetitionPenalty(repetition_penalty))
        if temperature != 1.0:
            parts.append(TemperatureScaling(temperature))
        if top_k is not None:
            parts.append(TopKFilter(top_k))
        if top_p is not None and top_p != 1.0:
            parts.append(TopPFilter(top_p))
        return cls(*parts)

    def __call__(self, logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        for p in self.processors:
            logits = p(logits, ids)
        return logits

    def __len__(self) -> int:
        return len(self.processors)

    def __iter__(self) -> Any:
        return iter(self.processors)

    def __repr__(self) -> str:
        return f"LogitsChain({', '.join(map(repr, self.processors))})"


def chain_of(processors: Sequence[Processor] | LogitsChain | None) -> LogitsChain:
    if processors is None:
        return LogitsChain()
    if isinstance(processors, LogitsChain):
        return processors
    return LogitsChain(*processors)
