"""Records: what a plan, a model or a run fixed, as plain data a drift report compares.

A record holds the resolved values in the nested shape of ``run.yaml`` (``net``,
``model``, ``train``, ``data``, ...), the code records of the user code they depend on,
and what its side cannot know. A finished run's record is read from its directory
(``run.yaml``, ``metadata.yaml`` and, for a run fitted from a plan, ``plan.json``).
Nothing here imports torch: two records are compared as data, which is what the
JupyterLab server extension does.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._ids import find_run_id, resolve_runs_root, run_dir
from ._records import read_record
from ._schemas.plan import read_run_plan

__all__ = [
    "BINDING_FILE",
    "ENVIRONMENT_KEYS",
    "PLAN_FILE",
    "Record",
    "code_name",
    "display_code",
    "environment_now",
    "flatten",
    "locate_run",
    "read_plan_file",
    "run_record",
]

PLAN_FILE = "plan.json"
BINDING_FILE = "binding.json"
ENVIRONMENT_KEYS = ("nnx_lab", "torch", "numpy", "python")


@dataclass(frozen=True)
class Record:
    """What one side fixed: ``values`` (nested, as in ``run.yaml``), ``code`` (one code
    record per role), ``unknown`` (path prefixes this side cannot know) and ``limits``."""

    kind: str  # "plan" | "model" | "run"
    label: str
    values: dict[str, Any]
    code: tuple[dict[str, Any], ...] = ()
    unknown: tuple[str, ...] = ()
    limits: tuple[str, ...] = ()
    run_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "label": self.label,
            "values": self.values,
            "code": [dict(c) for c in self.code],
            "unknown": list(self.unknown),
            "limits": list(self.limits),
            "run_id": self.run_id,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Record:
        return cls(
            kind=str(data["kind"]),
            label=str(data.get("label", data["kind"])),
            values=dict(data.get("values") or {}),
            code=tuple(dict(c) for c in data.get("code") or ()),
            unknown=tuple(data.get("unknown") or ()),
            limits=tuple(data.get("limits") or ()),
            run_id=data.get("run_id"),
        )


def flatten(values: Any, prefix: str = "") -> dict[str, Any]:
    """``{"train": {"optim": {"max_lr": 0.01}}}`` -> ``{"train.optim.max_lr": 0.01}``.
    Lists and ``None`` are leaves; an empty mapping is a leaf too."""
    if isinstance(values, dict) and values:
        out: dict[str, Any] = {}
        for key, value in values.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: values} if prefix else {}


def _version(dist: str, module: str) -> str | None:
    loaded = sys.modules.get(module)
    if loaded is not None and isinstance(getattr(loaded, "__version__", None), str):
        return str(loaded.__version__)
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment_now() -> dict[str, Any]:
    """The versions a run records in ``metadata.yaml``, as this process has them (read
    without importing torch)."""
    from .._version import __version__

    return {
        "nnx_lab": __version__,
        "torch": _version("torch", "torch"),
        "numpy": _version("numpy", "numpy"),
        "python": platform.python_version(),
    }


# -- code records, as data ------------------------------------------------------------
def code_name(record: dict[str, Any]) -> str:
    return f"{record.get('module')}.{record.get('qualname')}"


def display_code(record: dict[str, Any]) -> str:
    name = record.get("name") or code_name(record)
    digest = record.get("digest")
    if record.get("found") is False:
        return f"{name} (not found)"
    return f"{name} @{digest[:8]}" if digest else f"{name} (no readable code)"


# -- runs ----------------------------------------------------------------------------------
def _custom_loss_code(loss_json: Any) -> dict[str, Any] | None:
    if not isinstance(loss_json, dict) or "custom" not in loss_json:
        return None
    return {
        "role": "model.loss",
        "name": loss_json["custom"],
        "module": None,
        "qualname": None,
        "kind": "recorded",
        "digest": loss_json.get("code"),
    }


def read_plan_file(path: Path) -> dict[str, Any] | None:
    """A run's ``plan.json``, checked as the shape ``plan.fit()`` writes (a
    ``SchemaError`` naming the file, the field and the fix otherwise), or None when the
    run was not fitted from a plan. Its code records are names and digests: nothing it
    names is imported or looked up."""
    file = Path(path) / PLAN_FILE
    if not file.is_symlink() and not file.is_file():
        return None
    return read_run_plan(file)


def locate_run(run: Any, runs_root: str | os.PathLike[str] | None) -> tuple[str, Path]:
    """(id, directory) of a run given by id (or unique prefix), NNRun, or FitResult."""
    inner = getattr(run, "run", None)
    if inner is not None and hasattr(inner, "run_dir"):
        run = inner
    if hasattr(run, "run_dir") and hasattr(run, "id"):
        return str(run.id), Path(run.run_dir)
    if not isinstance(run, str):
        raise TypeError(
            f"a run is given by its id (a string), an NNRun or a FitResult, not a "
            f"{type(run).__name__}"
        )
    root = resolve_runs_root(runs_root)
    run_id = find_run_id(root, run, "run")
    return run_id, run_dir(root, run_id)


def run_record(run: Any, runs_root: str | os.PathLike[str] | None = None) -> Record:
    """A finished (or running) run's record, from its directory."""
    run_id, path = locate_run(run, runs_root)
    if not (path / "run.yaml").is_file():
        raise FileNotFoundError(
            f"no run {run_id!r} at {path} (no run.yaml); check the id, or pass runs_root="
        )
    config = read_record(path / "run.yaml")
    meta = read_record(path / "metadata.yaml") if (path / "metadata.yaml").is_file() else {}
    planned = read_plan_file(path)
    values: dict[str, Any] = dict(config)
    code: list[dict[str, Any]] = []
    if planned is not None:
        fixed = planned.get("record") or {}
        plan_values = fixed.get("values") or {}
        train = dict(values.get("train") or {})
        for key, value in (plan_values.get("train") or {}).items():
            train.setdefault(key, value)  # the knobs run.yaml leaves out (runs_root, ...)
        values["train"] = train
        if "early_stopping" in plan_values:
            values["early_stopping"] = plan_values["early_stopping"]
        code += [dict(c) for c in fixed.get("code") or ()]
    loss_code = _custom_loss_code((config.get("model") or {}).get("loss"))
    if loss_code is not None and not any(c.get("role") == "model.loss" for c in code):
        code.append(loss_code)
    env = {k: meta[k] for k in ENVIRONMENT_KEYS if k in meta}
    if env:
        values["environment"] = env
    return Record(
        "run",
        f"run {run_id[:8]}",
        values,
        tuple(code),
        run_id=run_id,
        extra={"run_dir": str(path), "from_plan": planned is not None},
    )
