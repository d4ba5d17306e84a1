"""The typed training state: what a stateful checkpoint carries and a resume restores.

One module owns the schema (``TrainingState``, generation ``GENERATION``), the capture
and restore of every random stream and generator (``RngState``), the state of the
run's stateful objects (callbacks and components), and the validation of a state read
back from disk. Warm resume, the loader peek before a run, and tools that must leave no
trace (the LR finder) all go through it.

Random streams: Python's, NumPy's, torch's CPU (and CUDA / MPS) generators, and each
loader's own generators (``DataLoader(generator=g)`` and a sampler built with its own
``generator=``). A loader's order is decided by torch's streams and those generators
only, which is why the cheap capture taken at every epoch start leaves the host streams
out.
"""

from __future__ import annotations

import contextlib
import random
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import torch

from ..errors import TrainingStateError
from .components import PREFIX as COMPONENT_PREFIX
from .components import capture_components, restore_components

__all__ = [
    "GENERATION",
    "RngState",
    "TrainingState",
    "capture_objects",
    "is_stateful",
    "preserved_rng",
    "restore_objects",
    "seed_everything",
]

# Bump when the meaning of a key changes; a resume refuses another generation.
GENERATION = 1


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _loader_generator(loader: Any) -> torch.Generator | None:
    gen = getattr(loader, "generator", None)
    return gen if isinstance(gen, torch.Generator) else None


def _sampler_generator(loader: Any) -> torch.Generator | None:
    """The sampler's generator when it is not the loader's own (that one is saved apart)."""
    gen = getattr(getattr(loader, "sampler", None), "generator", None)
    if isinstance(gen, torch.Generator) and gen is not _loader_generator(loader):
        return gen
    return None


def _batch_sampler_generator(loader: Any) -> torch.Generator | None:
    """A batch sampler's own generator (e.g. a data-parallel loader's shard sampler)."""
    gen = getattr(getattr(loader, "batch_sampler", None), "generator", None)
    if isinstance(gen, torch.Generator) and gen not in (
        _loader_generator(loader),
        _sampler_generator(loader),
    ):
        return gen
    return None


_GENERATORS = {
    "loader_generators": _loader_generator,
    "sampler_generators": _sampler_generator,
    "batch_sampler_generators": _batch_sampler_generator,
}


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


@dataclass
class RngState:
    """Every random stream at one moment; ``restore`` puts them back exactly."""

    torch_cpu: torch.Tensor
    torch_cuda: list[torch.Tensor] | None = None
    torch_mps: torch.Tensor | None = None
    python: dict[str, Any] | None = None  # None: not captured (epoch-start capture)
    numpy: tuple[Any, ...] | None = None
    loader_generators: list[torch.Tensor | None] = field(default_factory=list)
    sampler_generators: list[torch.Tensor | None] = field(default_factory=list)
    batch_sampler_generators: list[torch.Tensor | None] = field(default_factory=list)

    @classmethod
    def capture(cls, loaders: Sequence[Any] = (), *, host: bool = True) -> RngState:
        """torch's streams and the loaders' generators; with ``host``, Python's and
        NumPy's too (lossless)."""
        state = cls(
            torch_cpu=torch.get_rng_state(),
            torch_cuda=torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            torch_mps=torch.mps.get_rng_state() if _mps_available() else None,
            **{
                name: [g.get_state() if (g := find(ld)) is not None else None for ld in loaders]
                for name, find in _GENERATORS.items()
            },
        )
        if host:
            version, internal, gauss = random.getstate()
            # Python's Mersenne state as a tensor: 625 JSON ints would dominate a sidecar.
            state.python = {
                "version": version,
                "state": torch.from_numpy(np.array(internal, dtype=np.int64)),
                "gauss": gauss,
            }
            state.numpy = np.random.get_state()
        return state

    def restore(self, loaders: Sequence[Any] = ()) -> None:
        if self.python is not None:
            py = self.python
            random.setstate((py["version"], tuple(py["state"].tolist()), py["gauss"]))
        if self.numpy is not None:
            np.random.set_state(self.numpy)
        torch.set_rng_state(self.torch_cpu)
        if self.torch_cuda is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(self.torch_cuda)
        if self.torch_mps is not None and _mps_available():
            torch.mps.set_rng_state(self.torch_mps)
        for name, find in _GENERATORS.items():
            for loader, saved in zip(loaders, getattr(self, name), strict=False):
                gen = find(loader)
                if saved is not None and gen is not None:
                    gen.set_state(saved)

    def to_tree(self) -> dict[str, Any]:
        tree = {f.name: getattr(self, f.name) for f in fields(self)}
        if tree["torch_mps"] is None:
            del tree["torch_mps"]
        if tree["python"] is None:  # the epoch-start capture leaves the host streams out
            del tree["python"], tree["numpy"]
        return tree

    @classmethod
    def from_tree(cls, tree: Any, where: str) -> RngState:
        if not isinstance(tree, dict) or not isinstance(tree.get("torch_cpu"), torch.Tensor):
            raise TrainingStateError(f"{where}: the RNG state has no torch CPU stream")
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in tree.items() if k in names})


@contextlib.contextmanager
def preserved_rng(loaders: Sequence[Any] = ()) -> Iterator[RngState]:
    """Every random stream and the loaders' generators as they were, on exit."""
    saved = RngState.capture(loaders)
    try:
        yield saved
    finally:
        saved.restore(loaders)


# -- stateful objects (callbacks, components) -----------------------------------------


def is_stateful(obj: Any) -> bool:
    """Whether ``obj`` carries resumable state (``state_dict`` and ``load_state_dict``)."""
    return callable(getattr(obj, "state_dict", None)) and callable(
        getattr(obj, "load_state_dict", None)
    )


def capture_objects(objects: Sequence[Any]) -> dict[str, Any]:
    """``{"<index>:<qualname>": state}`` for each stateful object, in the given order,
    and ``{"component:<name>": ...}`` for each component (``components``)."""
    out = {
        f"{i}:{type(obj).__qualname__}": obj.state_dict()
        for i, obj in enumerate(objects)
        if is_stateful(obj)
    }
    out.update(capture_components(objects))
    return out


def restore_objects(objects: Sequence[Any], saved: dict[str, Any]) -> list[str]:
    """Match saved states to objects by type, in the order they were given.

    The index orders objects of one type (the JSON may list keys in any order). Returns
    the restored type names; a state with no object, or an object with no state, is
    reported with a warning.
    """
    components = {k: v for k, v in saved.items() if k.startswith(COMPONENT_PREFIX)}
    saved = {k: v for k, v in saved.items() if not k.startswith(COMPONENT_PREFIX)}
    by_type: dict[str, list[tuple[int, Any]]] = {}
    for key, value in saved.items():
        index, _, qualname = key.partition(":")
        by_type.setdefault(qualname, []).append((int(index), value))
    for queue in by_type.values():
        queue.sort(key=lambda item: item[0])
    restored = []
    for obj in objects:
        if not is_stateful(obj):
            continue
        name = type(obj).__qualname__
        queue = by_type.get(name)
        if queue:
            obj.load_state_dict(queue.pop(0)[1])
            restored.append(name)
        else:
            warnings.warn(
                f"resume: the checkpoint holds no state for {name}; it starts fresh",
                RuntimeWarning,
                stacklevel=4,
            )
    left = [name for name, queue in by_type.items() for _ in queue]
    if left:
        warnings.warn(
            f"resume: the checkpoint's state for {', '.join(left)} was not restored (no such "
            "callback or component in this train() call); pass the same objects to continue "
            "exactly",
            RuntimeWarning,
            stacklevel=4,
        )
    return restored + restore_components(objects, components)


# -- the training state ---------------------------------------------------------------


@dataclass
class TrainingState:
    """Everything a stateful resume restores besides the weights (docs/resume.md).

    Read like a mapping too (``state["scaler"]``, ``state["precision"]["effective"]``),
    as NNx's ``load_training_state`` result is.
    """

    epoch: int  # epochs completed
    step: int  # optimizer steps completed
    epoch_complete: bool  # False: written mid-epoch (a stop)
    batches_done: int  # loader batches of the interrupted epoch already trained
    optimizer: dict[str, Any]
    optimizer_topology: list[list[list[int]]]
    optimizer_name: str
    scheduler: dict[str, Any] | None
    scheduler_params: dict[str, Any] | None
    scaler: dict[str, Any] | None
    rng: RngState  # at the moment of writing
    epoch_start_rng: RngState | None  # mid-epoch: to replay the interrupted epoch's order
    best_value: float | None
    has_best: bool
    callbacks: dict[str, Any]  # capture_objects() of callbacks and components
    planned_epochs: int
    optim_params: dict[str, Any] | None = None
    accumulation_steps: int | None = None
    precision: dict[str, Any] | None = None  # ResolvedPrecision.record()
    monitor: dict[str, Any] | None = None  # MonitorState.state_dict() of a declared monitor
    partial_epoch: dict[str, Any] | None = None  # mid-epoch: the epoch's running sums

    # Keys a generation-1 state must hold; the optional ones above came later.
    REQUIRED = (
        "epoch",
        "step",
        "epoch_complete",
        "batches_done",
        "optimizer",
        "optimizer_topology",
        "optimizer_name",
        "scheduler",
        "scheduler_params",
        "scaler",
        "rng",
        "epoch_start_rng",
        "best_value",
        "has_best",
        "callbacks",
        "planned_epochs",
    )

    def __getitem__(self, key: str) -> Any:
        if key == "generation":
            return GENERATION
        if key not in self.keys():
            raise KeyError(key)
        return getattr(self, key)

    def keys(self) -> list[str]:
        return ["generation", *(f.name for f in fields(self))]

    def to_tree(self) -> dict[str, Any]:
        tree: dict[str, Any] = {"generation": GENERATION}
        for f in fields(self):
            value = getattr(self, f.name)
            tree[f.name] = value.to_tree() if isinstance(value, RngState) else value
        return tree

    @classmethod
    def from_tree(cls, tree: Any, *, source: str) -> TrainingState:
        """Validate a state read from ``source`` (a sidecar path) and type it."""
        if not isinstance(tree, dict):
            raise TrainingStateError(f"{source}: the training state is not a mapping")
        generation = tree.get("generation")
        if generation != GENERATION:
            raise TrainingStateError(
                f"resume training-state generation mismatch: {source} has generation "
                f"{generation!r}, this nnx_lab reads {GENERATION}; resume with "
                "resume_mode='weights_only'"
            )
        missing = [k for k in cls.REQUIRED if k not in tree]
        if missing:
            raise TrainingStateError(
                f"resume: the training state in {source} lacks {', '.join(missing)}; "
                "resume with resume_mode='weights_only'"
            )
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in tree.items() if k in names}
        values["rng"] = RngState.from_tree(tree["rng"], source)
        if tree["epoch_start_rng"] is not None:
            values["epoch_start_rng"] = RngState.from_tree(tree["epoch_start_rng"], source)
        if not tree["epoch_complete"] and values["epoch_start_rng"] is None:
            raise TrainingStateError(
                f"{source}: written mid-epoch but holds no epoch-start RNG state; resume "
                "with resume_mode='weights_only'"
            )
        return cls(**values)
