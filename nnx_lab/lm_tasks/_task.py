"""``CausalLMTask``: next-token training and evaluation on the public hooks (§3.6).

The objective returns one ``"mean"`` term whose numerator is the summed token
cross-entropy and whose denominator is the micro-batch's valid-token count, so the
engine's exact accumulation weighs every token of a window equally, however the
padding falls. The evaluator reports the unsmoothed token NLL as the loss, its
exponential as the perplexity and the token accuracy, and nothing else: precision or
F1 over a vocabulary would be numbers nobody asked for.

Batches (the step owns them):

- ``alignment="shift_inputs"``: ``ids`` ``(N, T)``, ``(ids,)``, ``(ids, loss_mask)`` or
  ``{"input_ids": ids, "loss_mask": mask}``. The network reads ``ids[:, :-1]`` and is
  scored on ``ids[:, 1:]``; ``loss_mask`` has the shape of ``ids`` and marks the tokens
  that count as targets (its first column never does: nothing predicts it).
- ``alignment="pre_shifted"``: ``(inputs, targets)``, ``(inputs, targets, loss_mask)`` or
  ``{"input_ids": inputs, "labels": targets, "loss_mask": mask}``, the mask shaped as
  ``targets``.

A target equal to ``ignore_id`` or ``pad_id``, or masked out, is not a valid token.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ..engine.adapters import forward
from ..engine.data import first_batch
from ..engine.edp import EDP
from ..engine.objective import LossTerm, Objective, ObjectiveResult
from ..engine.selection import MonitorSpec
from ..errors import ConfigError, DataError

__all__ = ["CausalLMTask", "TokenBatch"]

_ALIGNMENTS = ("shift_inputs", "pre_shifted")
_MONITORED = {"loss": "min", "perplexity": "min", "token_accuracy": "max"}


@dataclass(frozen=True)
class TokenBatch:
    """One batch read by the task: the network's ``inputs`` ``(N, T)``, the ``targets``
    they predict ``(N, T)`` and ``valid`` (bool, ``(N, T)``): the tokens that count."""

    inputs: torch.Tensor
    targets: torch.Tensor
    valid: torch.Tensor


def _int(value: Any, field: str, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(field, value, fix)
    return value


class CausalLMTask:
    """The next-token task of a causal language model over ``vocab_size`` token ids.

    ``objective()`` for ``train(objective=...)``, ``eval_step()`` for
    ``train(eval_step_fn=...)``, ``monitor("perplexity")`` to select on it.
    """

    def __init__(
        self,
        vocab_size: int,
        alignment: str = "shift_inputs",
        ignore_id: int = -100,
        pad_id: int | None = None,
        smoothing: float = 0.0,
    ) -> None:
        f = "CausalLMTask."
        self.vocab_size = _int(vocab_size, f + "vocab_size", "pass the tokenizer's vocabulary size")
        if vocab_size < 2:
            raise ConfigError(f + "vocab_size", vocab_size, "pass at least 2 token ids")
        if alignment not in _ALIGNMENTS:
            raise ConfigError(
                f + "alignment",
                alignment,
                '"shift_inputs" (batches of ids; targets are the ids shifted by one) or '
                '"pre_shifted" (batches of (inputs, targets))',
            )
        self.alignment = alignment
        self.ignore_id = _int(ignore_id, f + "ignore_id", "pass an int outside the vocabulary")
        if 0 <= ignore_id < vocab_size:
            raise ConfigError(
                f + "ignore_id",
                ignore_id,
                f"it is a real token id in [0, {vocab_size}); use a negative id such as -100 "
                "(and pad_id= for a padding token of the vocabulary)",
            )
        if pad_id is not None:
            pad_id = _int(pad_id, f + "pad_id", "pass a token id of the vocabulary, or None")
            if not 0 <= pad_id < vocab_size:
                raise ConfigError(
                    f + "pad_id", pad_id, f"a padding token id in [0, {vocab_size}), or None"
                )
        self.pad_id = pad_id
        if (
            isinstance(smoothing, bool)
            or not isinstance(smoothing, int | float)
            or not 0.0 <= float(smoothing) < 1.0
        ):
            raise ConfigError(f + "smoothing", smoothing, "a label smoothing in [0, 1)")
        self.smoothing = float(smoothing)

    def __repr__(self) -> str:
        return (
            f"CausalLMTask(vocab_size={self.vocab_size}, alignment={self.alignment!r}, "
            f"ignore_id={self.ignore_id}, pad_id={self.pad_id}, smoothing={self.smoothing})"
        )

    def config(self) -> dict[str, Any]:
        """The settings, as JSON (they enter the run id through the objective)."""
        return {
            "vocab_size": self.vocab_size,
            "alignment": self.alignment,
            "ignore_id": self.ignore_id,
            "pad_id": self.pad_id,
            "smoothing": self.smoothing,
        }

    # -- batches ----------------------------------------------------------------------------
    def _parts(self, batch: Any, where: str) -> tuple[Any, Any, Any]:
        """(ids or inputs, targets or None, loss mask or None) of one batch."""
        if isinstance(batch, torch.Tensor):
            parts: tuple[Any, ...] = (batch,)
        elif isinstance(batch, Mapping):
            if "input_ids" not in batch:
                raise DataError(where, f"a dict with keys {sorted(batch)}", "give it 'input_ids'")
            label = batch.get("labels", batch.get("targets"))
            parts = (batch["input_ids"], label, batch.get("loss_mask"))
            if self.alignment == "shift_inputs":
                parts = (parts[0], parts[2])
        elif isinstance(batch, list | tuple):
            parts = tuple(batch)
        else:
            raise DataError(where, f"a {type(batch).__name__}", self._form())
        if self.alignment == "shift_inputs":
            if len(parts) not in (1, 2):
                raise DataError(where, f"a tuple of {len(parts)} items", self._form())
            return parts[0], None, parts[1] if len(parts) == 2 else None
        if len(parts) not in (2, 3) or parts[1] is None:
            raise DataError(where, f"a batch of {len(parts)} items", self._form())
        return parts[0], parts[1], parts[2] if len(parts) == 3 else None

    def _form(self) -> str:
        if self.alignment == "shift_inputs":
            return 'alignment="shift_inputs" takes ids (N, T), (ids,) or (ids, loss_mask)'
        return 'alignment="pre_shifted" takes (inputs, targets) or (inputs, targets, loss_mask)'

    def split(self, batch: Any, device: Any = None, where: str = "batch") -> TokenBatch:
        """The batch as ``TokenBatch(inputs, targets, valid)`` (on ``device`` if given)."""
        ids, targets, mask = self._parts(batch, where)
        if not isinstance(ids, torch.Tensor) or ids.ndim != 2:
            raise DataError(where, f"its ids are {_describe(ids)}", "int64 token ids (N, T)")
        if device is not None:
            ids = ids.to(device, non_blocking=True)
            targets = None if targets is None else targets.to(device, non_blocking=True)
            mask = None if mask is None else mask.to(device, non_blocking=True)
        if targets is None:
            inputs, targets = ids[:, :-1], ids[:, 1:]
            mask = None if mask is None else mask[:, 1:]
        else:
            inputs = ids
        valid = targets != self.ignore_id
        if self.pad_id is not None:
            valid = valid & (targets != self.pad_id)
        if mask is not None:
            valid = valid & mask.bool()
        return TokenBatch(inputs, targets, valid)

    def check_batch(self, batch: Any, where: str) -> None:
        """Refuse a batch this task cannot score, naming what is wrong (no forward)."""
        ids, targets, mask = self._parts(batch, where)
        if not isinstance(ids, torch.Tensor) or ids.dtype != torch.long or ids.ndim != 2:
            raise DataError(where, f"its ids are {_describe(ids)}", "yield int64 token ids (N, T)")
        if self.alignment == "shift_inputs" and ids.shape[1] < 2:
            raise DataError(
                where,
                f"its windows hold {ids.shape[1]} token",
                "shift_inputs needs at least 2 tokens per row (one input, one target)",
            )
        self._in_vocab(ids, where + "'s ids", allow_ignore=False)
        shape = tuple(ids.shape)
        if targets is not None:
            if not isinstance(targets, torch.Tensor) or targets.dtype != torch.long:
                raise DataError(where, f"its targets are {_describe(targets)}", "int64 token ids")
            if tuple(targets.shape) != shape:
                raise DataError(
                    where,
                    f"targets of shape {tuple(targets.shape)} for inputs of shape {shape}",
                    "pre_shifted targets have the inputs' shape (one target per position)",
                )
            self._in_vocab(targets, where + "'s targets", allow_ignore=True)
        if mask is not None and (not isinstance(mask, torch.Tensor) or tuple(mask.shape) != shape):
            raise DataError(
                where,
                f"its loss mask is {_describe(mask)}",
                f"a loss mask of the ids' shape {shape} (1 / True: the token counts)",
            )

    def _in_vocab(self, t: torch.Tensor, where: str, allow_ignore: bool) -> None:
        if not t.numel():
            return
        bad = (t < 0) | (t >= self.vocab_size)
        if allow_ignore:
            bad &= t != self.ignore_id
        if bool(bad.any()):
            first = int(t[bad].reshape(-1)[0])
            ignore = f" or ignore_id={self.ignore_id}" if allow_ignore else ""
            raise DataError(
                where,
                f"holds token id {first}, outside the vocabulary [0, {self.vocab_size})",
                f"ids must be in [0, {self.vocab_size}){ignore}: check the tokenizer, or "
                "CausalLMTask(vocab_size=...)",
            )

    # -- the hooks --------------------------------------------------------------------------
    def check(self, model: Any, params: Any) -> None:
        """The preflight hook: the network's vocabulary and the loaders' first batches."""
        vocab = _net_vocab(model)
        if vocab is not None and vocab != self.vocab_size:
            raise ConfigError(
                "CausalLMTask.vocab_size",
                self.vocab_size,
                f"the network predicts {vocab} token ids: pass vocab_size={vocab}, or build "
                f"the network for {self.vocab_size}",
            )
        for name in ("train_loader", "val_loader"):
            loader = getattr(params, name, None)
            if loader is not None:
                field = f"NNTrainParams.{name}"
                self.check_batch(first_batch(loader, field), field + " (first batch)")

    def token_nll(
        self, net: torch.nn.Module, batch: TokenBatch, smoothing: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(Σ token cross-entropy, the logits, the valid mask flattened)."""
        logits = forward(net, batch.inputs)
        flat = logits.reshape(-1, logits.shape[-1])
        valid = batch.valid.reshape(-1)
        # every position runs through one kernel; invalid ones are zeroed, not gathered,
        # so no host sync on the valid count
        targets = torch.where(valid, batch.targets.reshape(-1), 0)
        per = F.cross_entropy(flat, targets, reduction="none", label_smoothing=smoothing)
        return (per * valid).sum(), flat, valid

    def objective(self, *, nonfinite: str = "fail") -> Objective:
        """The training loss: one term ``"token_ce"``, Σ over valid tokens / their count."""
        return _CausalLMObjective(self, nonfinite=nonfinite)

    def eval_step(self) -> Any:
        """An ``eval_step_fn(ctx) -> EDP``: NLL (the loss), perplexity, token accuracy."""
        return _CausalLMEval(self)

    def monitor(self, metric: str = "perplexity", min_delta: float = 0.0) -> MonitorSpec:
        """``MonitorSpec`` of a value the evaluator reports (``"perplexity"``,
        ``"token_accuracy"`` or ``"loss"``), with its direction."""
        if metric not in _MONITORED:
            raise ConfigError(
                "CausalLMTask.monitor(metric)", metric, f"one of {sorted(_MONITORED)}"
            )
        return MonitorSpec(metric, min_delta=min_delta, mode=_MONITORED[metric])

    def metric_specs(self) -> list[Any]:
        """No registry metric to declare: the evaluator reports its values itself
        (select with ``monitor()``)."""
        return []


class _CausalLMObjective(Objective):
    owns_batches = True  # (inputs, targets) pairs are token windows, not (X, class y)

    def __init__(self, task: CausalLMTask, nonfinite: str) -> None:
        super().__init__(nonfinite=nonfinite)
        self.task = task

    def compute(self, net: torch.nn.Module, batch: Any, ctx: Any) -> ObjectiveResult:
        b = self.task.split(batch, ctx.device)
        total, _, valid = self.task.token_nll(net, b, self.task.smoothing)
        return ObjectiveResult([LossTerm("token_ce", total, valid.sum())])

    def check(self, model: Any, params: Any) -> None:
        self.task.check(model, params)

    def run_identity(self) -> dict[str, Any]:
        return self.task.config()

    @property
    def name(self) -> str:
        return "CausalLMTask.objective"


class _CausalLMEval:
    """Validation over the whole loader: token sums kept on the device, one read."""

    def __init__(self, task: CausalLMTask) -> None:
        self.task = task

    def __call__(self, ctx: Any) -> EDP:
        sums = None
        rows = 0
        for batch in ctx.val_loader:
            b = self.task.split(batch, ctx.device)
            autocast = ctx.precision.autocast() if ctx.precision is not None else _null()
            with autocast:
                nll, flat, valid = self.task.token_nll(ctx.model, b, 0.0)
            hits = ((flat.argmax(-1) == b.targets.reshape(-1)) & valid).sum()
            part = torch.stack([nll.float(), hits.float(), valid.sum().float()])
            sums = part if sums is None else sums + part
            rows += int(b.inputs.shape[0])
        if sums is None:
            raise DataError("NNTrainParams.val_loader", "yields no batch", "pass a non-empty one")
        nll_sum, hits, count = (float(v) for v in sums.double().cpu())
        if count == 0:
            return EDP(loss=math.nan, samples=rows, valid=0, metrics={"perplexity": None})
        nll = nll_sum / count
        accuracy = hits / count
        return EDP(
            loss=nll,
            accuracy=accuracy,
            error=1.0 - accuracy,
            samples=rows,
            valid=int(count),
            metrics={
                "perplexity": math.exp(nll) if nll < 700 else math.inf,
                "token_accuracy": accuracy,
            },
        )


def _null() -> Any:
    import contextlib

    return contextlib.nullcontext()


def _net_vocab(model: Any) -> int | None:
    net_params = getattr(model, "net_params", None)
    vocab = getattr(net_params, "vocab_size", None)
    if isinstance(vocab, int):
        return vocab
    embed = getattr(getattr(model, "net", None), "embed", None)
    return embed.num_embeddings if isinstance(embed, torch.nn.Embedding) else None


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{value.dtype} of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"
