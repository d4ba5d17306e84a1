"""Probabilities, decoded labels and sample ids (§2.13).

A ``ProbabilitySpec`` declares how logits become probabilities: ``"categorical"``
(softmax over the class axis, argmax decoding) or ``"bernoulli"`` (element-wise sigmoid,
0/1 indicators at logit >= 0, the threshold ``predict()`` uses). The kind is always
declared, never inferred from the loss or the output's shape. ``prediction_from_logits``
applies the spec to logits; ``NNModel.predict_proba`` calls it on ``predict()``'s logits.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..errors import PredictionValidationError

__all__ = [
    "KINDS",
    "PredictionBatch",
    "PredictionResult",
    "ProbabilitySpec",
    "as_sample_ids",
    "prediction_from_logits",
]

KINDS = ("categorical", "bernoulli")
_STATE_FORMAT = "nnx_lab.probability_spec"
_STATE_VERSION = 1


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


@dataclass(frozen=True)
class ProbabilitySpec:
    """``ProbabilitySpec(kind="categorical", class_axis=1, labels=("cat", "dog", "fox"))``.

    ``class_axis`` (default -1) is the axis of the logits that holds the classes (or, for
    ``"bernoulli"``, the independent outputs); axis 0 is always the row axis. ``labels``
    names the classes in the order of that axis (strings or integers, unique), or is
    None.
    """

    kind: str
    class_axis: int = -1
    labels: tuple[str | int, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise PredictionValidationError(
                "ProbabilitySpec.kind",
                f"{self.kind!r} is not a kind",
                "declare kind='categorical' (softmax over classes) or kind='bernoulli' "
                "(independent sigmoid outputs); the kind is never inferred",
            )
        if not _is_int(self.class_axis):
            raise PredictionValidationError(
                "ProbabilitySpec.class_axis",
                f"{self.class_axis!r} is not an integer axis",
                "pass the axis of the logits that holds the classes, e.g. -1 or 1",
            )
        object.__setattr__(self, "class_axis", int(self.class_axis))
        if self.labels is not None:
            object.__setattr__(self, "labels", _check_labels(self.labels))
            if self.kind == "categorical" and len(self.labels) < 2:
                raise PredictionValidationError(
                    "ProbabilitySpec.labels",
                    f"{len(self.labels)} label for kind='categorical'",
                    "a categorical spec names at least 2 classes; declare kind='bernoulli' "
                    "for one binary output",
                )

    # -- shapes -------------------------------------------------------------------------------
    def axis_for(self, shape: Sequence[int]) -> int:
        """The class axis as a non-negative index into ``shape``, or a refusal."""
        ndim = len(shape)
        axis = self.class_axis + ndim if self.class_axis < 0 else self.class_axis
        if ndim < 2 or not 0 < axis < ndim:
            raise PredictionValidationError(
                "ProbabilitySpec.class_axis",
                f"class_axis={self.class_axis} is not a class axis of logits of shape "
                f"{tuple(shape)} (axis 0 holds the rows)",
                "use an axis in [1, ndim) or its negative form, e.g. -1 for (N, C) and 1 "
                "for (N, C, H, W); give a single binary logit per row the shape (N, 1)",
            )
        return axis

    def check_shape(self, shape: Sequence[int]) -> int:
        """Refuse logits of ``shape`` this spec cannot describe; returns the class axis."""
        axis = self.axis_for(shape)
        if self.labels is not None and len(self.labels) != shape[axis]:
            raise PredictionValidationError(
                "ProbabilitySpec.labels",
                f"{len(self.labels)} labels for a class axis of size {shape[axis]} (axis "
                f"{axis} of logits of shape {tuple(shape)})",
                f"give exactly {shape[axis]} labels, in the order of the class axis, or "
                "check class_axis",
            )
        if self.kind == "categorical" and shape[axis] < 2:
            raise PredictionValidationError(
                "ProbabilitySpec.kind",
                f"'categorical' over a class axis of size {shape[axis]}",
                "a softmax over one class is always 1: declare kind='bernoulli' for a single "
                "binary logit",
            )
        return axis

    # -- state ---------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Plain JSON data, label order included; ``ProbabilitySpec.from_state`` reads it."""
        return {
            "format": _STATE_FORMAT,
            "version": _STATE_VERSION,
            "kind": self.kind,
            "class_axis": self.class_axis,
            "labels": None if self.labels is None else list(self.labels),
        }

    @classmethod
    def from_state(cls, state: Any) -> ProbabilitySpec:
        if not isinstance(state, dict):
            raise PredictionValidationError(
                "ProbabilitySpec.from_state",
                f"a {type(state).__name__} is not a spec state",
                "pass the dict that spec.state() returned",
            )
        if state.get("format") != _STATE_FORMAT or state.get("version") != _STATE_VERSION:
            raise PredictionValidationError(
                "ProbabilitySpec.from_state",
                f"format={state.get('format')!r}, version={state.get('version')!r} is not "
                f"{_STATE_FORMAT!r} version {_STATE_VERSION}",
                "pass the dict that spec.state() returned (a state without its format is "
                "refused: docs/nnx_differences.md)",
            )
        missing = [k for k in ("kind", "class_axis", "labels") if k not in state]
        if missing:
            raise PredictionValidationError(
                "ProbabilitySpec.from_state",
                f"the state lacks {', '.join(missing)}",
                "pass the dict that spec.state() returned",
            )
        labels = state["labels"]
        if labels is not None and not isinstance(labels, list | tuple):
            raise PredictionValidationError(
                "ProbabilitySpec.from_state",
                f"labels={labels!r} is not a list",
                "pass the dict that spec.state() returned",
            )
        return cls(
            kind=state["kind"],
            class_axis=state["class_axis"],
            labels=None if labels is None else tuple(labels),
        )


def _check_labels(labels: Any) -> tuple[str | int, ...]:
    if isinstance(labels, str | bytes) or not isinstance(labels, Sequence | np.ndarray):
        raise PredictionValidationError(
            "ProbabilitySpec.labels",
            f"{labels!r} is not a sequence of labels",
            "pass a tuple of class names, e.g. labels=('cat', 'dog', 'fox')",
        )
    out: list[str | int] = []
    for label in labels:
        if isinstance(label, np.generic):
            label = label.item()
        if isinstance(label, str) and not label.strip():
            raise PredictionValidationError(
                "ProbabilitySpec.labels",
                f"the label {label!r} is empty",
                "labels must be non-empty strings (or integers)",
            )
        if not (isinstance(label, str) or _is_int(label)):
            raise PredictionValidationError(
                "ProbabilitySpec.labels",
                f"the label {label!r} is a {type(label).__name__}",
                "use strings or integers as labels (they are saved as JSON)",
            )
        out.append(label)
    if not out:
        raise PredictionValidationError(
            "ProbabilitySpec.labels", "is empty", "pass one label per class, or labels=None"
        )
    if len(set(out)) != len(out):
        dupes = sorted({str(x) for x in out if out.count(x) > 1})
        raise PredictionValidationError(
            "ProbabilitySpec.labels",
            f"repeats {', '.join(dupes)}",
            "give each class a distinct label",
        )
    return tuple(out)


def as_sample_ids(sample_ids: Any, rows: int, field: str = "sample_ids") -> np.ndarray:
    """Sample ids as a 1-D int64 array of ``rows`` entries (default: 0 .. rows - 1)."""
    if sample_ids is None:
        return np.arange(rows, dtype=np.int64)
    if isinstance(sample_ids, torch.Tensor):
        sample_ids = sample_ids.detach().cpu().numpy()
    ids = np.asarray(sample_ids)
    if ids.ndim != 1 or ids.shape[0] != rows:
        raise PredictionValidationError(
            field,
            f"has shape {ids.shape} for {rows} rows",
            f"pass one id per row: a 1-D sequence of {rows} integers",
        )
    if rows and not np.issubdtype(ids.dtype, np.integer):
        raise PredictionValidationError(
            field, f"has dtype {ids.dtype}", "pass integer ids (e.g. row or dataset indices)"
        )
    return ids.astype(np.int64, copy=False)


@dataclass(frozen=True)
class PredictionResult:
    """``predict_proba()``'s result.

    ``logits`` are exactly ``predict()``'s; ``probabilities`` the softmax over the class
    axis (each row sums to 1) or the element-wise sigmoid; ``decoded`` argmax class
    indices or 0/1 indicators (a regression model: its continuous values, with
    ``probabilities`` and ``spec`` None); ``sample_ids`` the identity of each row.

    The fields are torch tensors, on the model's device; ``to_numpy()`` gives NNx's
    NumPy form (docs/nnx_differences.md).
    """

    logits: torch.Tensor
    probabilities: torch.Tensor | None
    decoded: torch.Tensor
    spec: ProbabilitySpec | None
    sample_ids: np.ndarray

    def __len__(self) -> int:
        return int(self.logits.shape[0])

    def to_numpy(self) -> Any:
        """NNx's form: NumPy arrays, probabilities in the logits' dtype (float16 stays
        float16; bfloat16, which NumPy has not, gives float32); ``NumpyPrediction``."""
        from .prediction_numpy import to_numpy

        return to_numpy(self)

    @property
    def class_indices(self) -> torch.Tensor:
        """The decoded class indices; refused where ``decoded`` holds something else."""
        if self.spec is None:
            raise PredictionValidationError(
                "class_indices",
                "a regression prediction has continuous values, not classes",
                "read result.decoded",
            )
        if self.spec.kind == "bernoulli":
            raise PredictionValidationError(
                "class_indices",
                "a 'bernoulli' prediction decodes to independent 0/1 indicators, not class indices",
                "read result.decoded (one 0/1 per output), or declare kind='categorical' if "
                "the outputs are mutually exclusive classes",
            )
        return self.decoded

    def decoded_labels(self) -> np.ndarray:
        """Labels of the decoded classes (an object array shaped like ``decoded``); for
        ``"bernoulli"``, one tuple per row of the labels whose indicator is 1."""
        spec = self.spec
        if spec is None:
            raise PredictionValidationError(
                "decoded_labels",
                "a regression prediction has no labels",
                "read result.decoded",
            )
        if spec.labels is None:
            raise PredictionValidationError(
                "ProbabilitySpec.labels",
                "is None, so there are no names to decode to",
                "declare labels=(...) in the ProbabilitySpec, or read result.decoded",
            )
        names = np.empty(len(spec.labels), dtype=object)
        names[:] = list(spec.labels)
        if spec.kind == "categorical":
            return names[self.decoded.cpu().numpy()]
        axis = spec.axis_for(tuple(self.logits.shape))
        on = np.moveaxis(self.decoded.cpu().numpy(), axis, -1).astype(bool)
        flat = on.reshape(-1, on.shape[-1])
        out = np.empty(flat.shape[0], dtype=object)
        out[:] = [tuple(names[row]) for row in flat]
        return out.reshape(on.shape[:-1])


@dataclass(frozen=True)
class PredictionBatch:
    """One streamed batch of ``iter_predict()``: ``predict()``'s fields and the rows' ids."""

    logits: torch.Tensor
    classes: torch.Tensor
    sample_ids: np.ndarray

    def __len__(self) -> int:
        return int(self.logits.shape[0])

    def __iter__(self) -> Iterator[Any]:
        return iter((self.logits, self.classes))


def _given_logits(logits: Any) -> Any:
    if isinstance(logits, np.ndarray):
        return torch.from_numpy(logits)
    return logits.detach() if isinstance(logits, torch.Tensor) else logits


def _check_logits(logits: Any) -> torch.Tensor:
    if isinstance(logits, np.ndarray):
        logits = torch.from_numpy(logits)
    if not isinstance(logits, torch.Tensor):
        raise PredictionValidationError(
            "logits",
            f"a {type(logits).__name__} is not a tensor",
            "pass the logits as a torch tensor or a NumPy array",
        )
    if not logits.is_floating_point():
        raise PredictionValidationError(
            "logits", f"has dtype {logits.dtype}", "pass floating-point logits"
        )
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()  # probabilities in at least float32
    return logits.detach()


def prediction_from_logits(
    logits: Any, spec: ProbabilitySpec, *, sample_ids: Any = None
) -> PredictionResult:
    """Apply ``spec`` to logits you already have: the same rules as ``predict_proba``.

    Refuses (``PredictionValidationError``) a label count that does not match the class
    axis, an invalid axis, and NaN / ±inf logits.
    """
    if not isinstance(spec, ProbabilitySpec):
        raise PredictionValidationError(
            "spec",
            f"a {type(spec).__name__} is not a ProbabilitySpec",
            "pass ProbabilitySpec(kind='categorical' | 'bernoulli', class_axis=..., labels=...)",
        )
    given, logits = _given_logits(logits), _check_logits(logits)
    axis = spec.check_shape(tuple(logits.shape))
    finite = torch.isfinite(logits)
    if not bool(finite.all()):
        bad = ~finite
        rows = bad.reshape(bad.shape[0], -1).any(1).nonzero().reshape(-1)
        raise PredictionValidationError(
            "logits",
            f"{int(bad.sum())} NaN/inf values in {rows.numel()} rows (first: row {int(rows[0])})",
            "find what overflowed in the model or its inputs; probabilities of non-finite "
            "logits would be meaningless",
        )
    ids = as_sample_ids(sample_ids, int(logits.shape[0]))
    if spec.kind == "categorical":
        probabilities = torch.softmax(logits, dim=axis)
        decoded = logits.argmax(dim=axis)
    else:
        probabilities = torch.sigmoid(logits)
        decoded = (logits >= 0).long()
    # the logits as given (float16 stays float16: to_numpy() gives probabilities in it)
    return PredictionResult(given, probabilities, decoded, spec, ids)
