"""What a model fixed when it was built, against what its attributes say now.

``NNModel.train`` prints a banner when a model drifted (its params were reassigned, or
its loss function was redefined, since it was built). The engine computes that itself
from the torch-free comparison below it (``nnx_lab/runs/_compare.py``): plans build on
the engine, never the reverse.

Code is looked up only among the modules this process has already loaded, and read
statically: a record is data (one read from a run folder may be someone else's), and
comparing never imports or calls what it names.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from ..runs import DriftReport, Record, compare_records, emit, environment_now
from .fingerprint import code_digest, code_target

__all__ = ["code_now", "loaded_object", "model_drift", "model_record", "print_model_banner"]


def loaded_object(module: str, qualname: str) -> Any:
    """The object bound at ``module.qualname`` in a module already loaded, or None.
    Read statically (no module ``__getattr__``, no property runs) and never imported."""
    obj: Any = sys.modules.get(module)
    if obj is None:
        return None
    for part in qualname.split("."):
        obj = inspect.getattr_static(obj, part, None)
        if obj is None:
            return None
    return obj


def _split_find(name: str) -> tuple[Any, bool]:
    """(the object at a dotted ``module.qualname`` whose split point is unknown, whether
    a module of it is loaded), among the modules already loaded."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        if module in sys.modules:
            return loaded_object(module, ".".join(parts[cut:])), True
    return None, False


def code_now(record: dict[str, Any], held: Any = None) -> dict[str, Any]:
    """The code bound today at the name ``record`` was taken from, looked up among the
    modules this process has loaded: a record is data (a run folder's may be someone
    else's), so nothing it names is imported.

    Adds ``found`` (the name exists now), ``loaded`` (its module is loaded in this
    process: when not, nothing can be said until the user imports it), ``digest`` (of
    what it names now) and, when the object the handle holds is given, ``same_object``
    (the name still names it: a changed digest then means its source file was edited
    but not reloaded).
    """
    module, qualname = record.get("module"), record.get("qualname")
    if isinstance(module, str) and isinstance(qualname, str) and module and qualname:
        obj, loaded = loaded_object(module, qualname), module in sys.modules
    else:
        obj, loaded = _split_find(str(record.get("name", "")))
    now = dict(record)
    now["found"] = obj is not None
    now["loaded"] = loaded
    now["digest"] = None if obj is None else code_digest(obj)
    if held is not None:
        now["same_object"] = obj is held
        if obj is held:
            # The same object runs the code it was compiled from; its file may read
            # otherwise now (edited, not reloaded).
            now["digest"] = code_digest(obj, fresh=True)
    return now


def model_record(model: Any, *, now: bool) -> Record:
    """A model's values and loss code, as fixed when it was built (``now=False``) or as
    its attributes say today (``now=True``)."""
    fixed = getattr(model, "fixed", None)
    if fixed is None:
        raise TypeError(f"{type(model).__name__} records nothing at construction")
    label = "model, when built" if not now else "model, now"
    if not now:
        values = {"net": fixed["net"], "model": fixed["model"], "environment": environment_now()}
        return Record("model", label, values, tuple(fixed["code"]))
    held = getattr(model, "loss_fn", None)
    held_loss = None if held is None else held.custom
    target = None if held_loss is None else code_target(held_loss)[0]
    code = tuple(code_now(c, held=target) for c in fixed["code"])
    values = {
        "net": model.net_params.to_json()
        if model.net_params is not None
        else model.params.net.to_json(),
        "model": model.params.to_json(),
        "environment": environment_now(),
    }
    lands = held_loss is None or model.params.loss is held_loss
    return Record("model", label, values, code, extra={"loss_lands": lands})


def model_drift(model: Any) -> DriftReport:
    """The model as built against the model now."""
    return compare_records(
        model_record(model, now=False), model_record(model, now=True), handle="model"
    )


def print_model_banner(model: Any, enabled: bool | None = None) -> None:
    """Print the model's drift banner, when it drifted (``set_config_report`` silences it)."""
    text = model_drift(model).short()
    if text:
        emit(text, enabled)
