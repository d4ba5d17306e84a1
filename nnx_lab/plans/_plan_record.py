"""What a plan fixed, as a ``Record`` the drift report compares: its resolved values, the
code of its custom loss, data factories and callbacks (as taken, or as their names mean
now), and what the record cannot know (borrowed loaders' contents, callbacks' settings).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..engine.params import NNModelParams
from ..runs import FORMAT_VERSION
from ._fields import _RUN_KNOBS, Resolved
from ._problems import json_safe
from ._record import Record, code_now, environment_now
from ._refs import held_target
from ._sources import Source

__all__ = ["plan_record"]

_LABELS = {"then": "plan, when built", "now": "plan, now", "fit": "plan"}


def plan_record(
    resolved: Resolved,
    values: Mapping[str, Any],
    loss: dict[str, Any] | None,
    data: tuple[Source | None, Source | None],
    callbacks: tuple[Source, ...],
    mode: str,
) -> Record:
    """``mode`` "then": code as taken when it entered the plan; "now": code looked up by
    name today; "fit": code as taken and the loss as it is now (what a fit runs).
    ``loss`` is the custom loss's entry (``loss_entry``), None for a built-in one."""
    r = resolved
    model = r.model.to_json() if loss is None else _model_json(r.model, loss, mode)
    train = {**r.train.identity(), **{k: getattr(r.train, k) for k in _RUN_KNOBS}}
    out: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "net": (r.net if r.net is not None else r.model.net).to_json(),
        "model": model,
        "train": train,
        "early_stopping": r.early_stopping,
        "environment": environment_now(),
    }
    unknown = ["data.train", "data.val", "initial_weights"]
    if r.train.data_id is not None:
        out["data"] = {"data_id": r.train.data_id}
    else:
        unknown.append("data")
    for p in r.problems:  # a refused value is recorded as it was given
        _put(out, p.field, json_safe(p.value))
    held: list[tuple[dict[str, Any], Any]] = []
    if loss is not None:
        held.append((loss["code"], values.get("model.loss")))
    for src in data:
        if src is not None and src.kind in ("factory", "reference"):
            held.append((src.code, src.obj))
    for cb in callbacks:
        held.append((cb.code, cb.obj))
    if mode == "now":
        code = tuple(code_now(c, held=held_target(obj)) for c, obj in held)
    else:
        code = tuple(dict(c) for c, _ in held)
    limits = []
    for src in data:
        if src is not None and src.kind == "instance":
            limits.append(
                f"{src.code['role']} is a borrowed {type(src.obj).__qualname__}: its "
                "contents are not read for this report (reading a loader can move its "
                "random generator); the run id still covers them at fit."
            )
    if callbacks:
        limits.append(
            "Callbacks are compared by their class's code; their settings are not "
            "probed (building one from its factory could have side effects)."
        )
    return Record("plan", _LABELS[mode], out, code, tuple(unknown), tuple(limits))


def _put(values: dict[str, Any], path: str, value: Any) -> None:
    node = values
    parts = path.split(".")
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            node[part] = nxt
        node = nxt
    node[parts[-1]] = value


def _model_json(model: NNModelParams, loss: dict[str, Any], mode: str) -> dict[str, Any]:
    """The model's JSON with the custom loss's identity as taken ("then") or as the
    object is now."""
    base = {k: v for k, v in vars(model).items() if k != "loss"}
    out = NNModelParams(**base).to_json()  # the loss is then the default: replaced below
    if mode == "then" or loss.get("reference"):
        out["loss"] = loss["identity"]
    else:
        from ..engine.losses import custom_loss_identity

        out["loss"] = custom_loss_identity(model.loss)
    return out
