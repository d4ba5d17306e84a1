"""The shape of a checkpoint sidecar (``checkpoints/last.json`` / ``best.json``).

The sidecar is JSON next to the tensors: which tensors file it commits, that file's
SHA-256 and its own, the run and the recipe it builds (``net_params``,
``model_params``), where in training it was written (``epoch``, ``step``) and the
training state's JSON half. The shape checks every field's type and range; its rules
check that the tensors file is a plain file name of the folder and that the training
state's references are well formed. The reader (``engine/checkpoint.py``) then checks
the checksums, the type, the run and the recipe against ``run.yaml``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import msgspec

from ...errors import CheckpointCorruptError
from .._format import FORMAT_VERSION
from .._schema import NonNegativeInt
from .reading import HEX64, Problem, Refusal, found, join, plain_problem

__all__ = ["TENSORS_FILE", "CheckpointFileError", "SidecarFile", "state_problem"]

# What a sidecar may name: a plain file of its folder, as the writer names them.
TENSORS_FILE = re.compile(r"(last|best|first|q[123])-[0-9]{8,}-[0-9a-f]{8}\.safetensors")
RunId = Annotated[str, msgspec.Meta(pattern=r"\A[0-9a-f]{32}\Z")]
# A NumPy dtype of numbers (byte order, kind, width in bytes): what split_state writes.
_NUMPY_DTYPE = re.compile(r"[<>|=](b1|[iu][1248]|f[248])")
_TAGS = ("__tensor__", "__ndarray__", "__npscalar__", "__tuple__", "__dict__")


class CheckpointFileError(Refusal, CheckpointCorruptError):
    """A sidecar or a tensors file that is not what nnx_lab wrote (a ``SchemaError`` and
    a ``CheckpointCorruptError``, as it always was)."""


class SidecarFile(msgspec.Struct, forbid_unknown_fields=True):
    """What ``write_checkpoint`` writes. The fields after ``model_params`` have defaults
    because checkpoints written by hand (tests, tools) and older writers omit them."""

    format: Literal[FORMAT_VERSION]  # type: ignore[valid-type]
    type: Literal["last", "best", "first", "q1", "q2", "q3"]
    tensors_file: Annotated[str, msgspec.Meta(max_length=255)]
    sha256: HEX64
    weights_only: bool
    training_state: dict[str, Any] | None
    run_id: RunId
    net_params: dict[str, Any]
    model_params: dict[str, Any]
    world_size: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)] = 1
    epoch: NonNegativeInt = 0
    step: NonNegativeInt = 0
    epoch_complete: bool = True
    signal_unavailable: bool = False
    # the epoch and step this checkpoint counts as BEST (None: none yet); a resume carries
    # the BEST the checkpoint names (engine/resume_best.py)
    best_epoch: NonNegativeInt | None = None
    best_step: NonNegativeInt | None = None
    sidecar_sha256: HEX64 | None = None

    def rules(self) -> Iterator[Problem]:
        return found(
            [
                None
                if TENSORS_FILE.fullmatch(self.tensors_file)
                else Problem(
                    "tensors_file",
                    "a sidecar may only name a tensors file of its own folder",
                    self.tensors_file,
                ),
                Problem(
                    "weights_only",
                    "a weights-only checkpoint has no training state, and a full one has one",
                    self.weights_only,
                )
                if self.weights_only != (self.training_state is None)
                else None,
                plain_problem(self.net_params, "net_params"),
                plain_problem(self.model_params, "model_params"),
                # an optimizer's state may hold an infinity (ReduceLROnPlateau's mode_worse)
                plain_problem(self.training_state, "training_state", finite=False),
                None
                if self.training_state is None
                else state_problem(self.training_state, "training_state"),
            ]
        )


def state_problem(tree: Any, field: str, tensors: dict[str, str] | None = None) -> Problem | None:
    """The first tagged node of a training state's JSON that ``join_state`` could not
    rebuild: a tensor reference that is not a name (or, given ``tensors``, name -> dtype
    of the tensors file, not one of its tensors), an array of a dtype that is not a
    number, a tuple that is not a list, a dict that is not a list of pairs. Walked
    without recursion."""
    stack: list[tuple[Any, str]] = [(tree, field)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        tag = next((t for t in _TAGS if t in node), None)
        if tag is None:
            stack.extend((v, join(where, str(k))) for k, v in node.items())
            continue
        problem = _tagged(node, tag, join(where, tag), tensors)
        if problem is not None:
            return problem
        if tag == "__tuple__":
            stack.extend((v, f"{where}.__tuple__[{i}]") for i, v in enumerate(node[tag]))
        elif tag == "__dict__":
            stack.extend((p[1], f"{where}.__dict__[{i}][1]") for i, p in enumerate(node[tag]))
    return None


def _scalar_problem(value: Any, dtype: str, where: str) -> Problem | None:
    """A NumPy scalar's value must be of its dtype's kind and, for integers, in range
    (NumPy raises OverflowError for ``uint8(300)``)."""
    kind, bits = dtype[0], 8 * int(dtype[1:])
    if kind == "b":
        ok = isinstance(value, bool)
    elif kind == "f":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    else:
        low, high = (0, 2**bits) if kind == "u" else (-(2 ** (bits - 1)), 2 ** (bits - 1))
        ok = isinstance(value, int) and not isinstance(value, bool) and low <= value < high
    return None if ok else Problem(where, f"is not a value of dtype {dtype}", value)


def _tagged(node: dict, tag: str, where: str, tensors: dict[str, str] | None) -> Problem | None:
    value = node[tag]
    extra = set(node) - {tag, "dtype"}
    if extra:
        return Problem(where, f"a tagged node holds only {tag} and dtype", sorted(extra))
    if tag in ("__tensor__", "__ndarray__"):
        if not isinstance(value, str) or not value:
            return Problem(where, "names a tensor of the tensors file", value)
        if tensors is not None and value not in tensors:
            return Problem(where, "names a tensor the tensors file does not hold", value)
        if tag == "__ndarray__" and tensors is not None and tensors[value] == "BF16":
            return Problem(where, "an array cannot be bfloat16 (NumPy has no such dtype)", value)
    if tag in ("__ndarray__", "__npscalar__"):
        dtype = node.get("dtype")
        if not isinstance(dtype, str) or not _NUMPY_DTYPE.fullmatch(dtype):
            return Problem(f"{where[: -len(tag)]}dtype", "is not a NumPy dtype of numbers", dtype)
    if tag == "__npscalar__":
        return _scalar_problem(value, node["dtype"][1:], where)
    if tag == "__tuple__" and not isinstance(value, list):
        return Problem(where, "a tuple is saved as a list", value)
    if tag == "__dict__":
        pairs = isinstance(value, list) and all(
            isinstance(p, list)
            and len(p) == 2
            and (p[0] is None or isinstance(p[0], bool | int | float | str))
            for p in value
        )
        if not pairs:
            return Problem(where, "a dict is saved as a list of [key, value] pairs", value)
    return None
