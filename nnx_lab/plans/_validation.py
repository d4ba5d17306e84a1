"""``plan.validate()``: every problem of a plan at once, one per field (field, value,
fix), before anything exists.

Reads no loader, calls no factory and builds no model: the values are checked by
``resolve()`` one field at a time, the data sources and callbacks by their shape (a
factory must take no argument; an instance must be a reusable loader, or a callback the
event stream accepts), the references of a plan read from JSON without importing them
(``_plan_refs``), the device and precision against this machine, and a run to
resume against the runs root.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..engine.enums import Nets
from ..engine.net_kinds import NET_PARAMS
from ..engine.params import CustomLossRef, NNModelParams, NNTrainParams
from ..engine.precision import device_can_run
from ..engine.registry import (
    RUNTIME_FIX,
    ModelSpec,
    RuntimeModuleRef,
    registered_model_factories,
)
from ..runs import is_run_id, resolve_runs_root, run_dir
from ._fields import EARLY_STOPPING, SCHEDULER, Resolved, plan_fields
from ._locate import runs_roots
from ._net_value import SpecWithFactory
from ._plan_refs import has_references, reference_problems
from ._problems import Problem, Problems
from ._sources import Source, takes_no_arguments

__all__ = ["plan_problems", "source_problem"]


def plan_problems(
    resolved: Resolved,
    values: Mapping[str, Any],
    data: tuple[Source | None, Source | None],
    callbacks: tuple[Source, ...],
) -> Problems:
    """The problems of a plan's values (as ``resolved``), data and callbacks, in the
    order of the fields."""
    problems = list(resolved.problems)
    flagged = {p.field for p in problems}
    for toggle in (SCHEDULER, EARLY_STOPPING):
        value = values.get(toggle, False)
        if not isinstance(value, bool):
            problems.append(Problem(toggle, value, "pass True or False"))
    loss = values.get("model.loss")
    if isinstance(loss, CustomLossRef):
        problems.append(
            Problem(
                "model.loss",
                loss.name,
                "this loss came from a saved record, which holds no code; pass the loss "
                "again: plan.with_loss(YourLoss())",
            )
        )
    if "model.net" not in flagged:
        problems += _net_problems(resolved, values)
    if not flagged & {"model.device", "model.precision", "model.mixed_precision"}:
        problems += _device_problems(resolved.model)
    if has_references(values, data, callbacks):
        roots = runs_roots(resolved.train.runs_root)
        problems += reference_problems(values, data, callbacks, roots)
    problems += _data_problems(data)
    problems += _callback_problems(callbacks)
    if "train.resume_from_run_id" not in flagged and "train.runs_root" not in flagged:
        problems += _resume_problems(resolved.train)
    order = {f.path: i for i, f in enumerate(plan_fields())}
    problems.sort(key=lambda p: order.get(p.field, len(order)))
    return Problems(problems)


def source_problem(obj: Any, role: str) -> Problem | None:
    """What is wrong with ``obj`` as a loader that every epoch reads again, if anything."""
    if isinstance(obj, str | bytes) or not isinstance(obj, Iterable):
        return Problem(
            role,
            obj,
            "pass a factory (a function returning a loader) or a DataLoader / list of "
            "(X, y) batches",
        )
    if isinstance(obj, Iterator):
        return Problem(
            role,
            obj,
            "a one-shot iterator runs dry after one epoch; pass a DataLoader, a list of "
            "batches, or a factory that returns one",
        )
    return None


def _data_problems(data: tuple[Source | None, Source | None]) -> list[Problem]:
    train, val = data
    problems = []
    if train is None:
        problems.append(
            Problem(
                "data.train",
                None,
                "give the training data: plan.with_data(make_train_loader, "
                "val=make_val_loader), factories returning DataLoaders or lists of "
                "(X, y) batches",
            )
        )
    for role, src in (("data.train", train), ("data.val", val)):
        if src is None or src.kind == "reference":  # checked by reference_problems
            continue
        if src.kind == "factory":
            if takes_no_arguments(src.obj) is False:
                problems.append(
                    Problem(
                        role,
                        src.name,
                        f"a data factory is called with no argument, and {src.name} "
                        "needs some; wrap it: def make(): return "
                        f"{src.obj.__qualname__}(...)",
                    )
                )
            continue
        problem = source_problem(src.obj, role)
        if problem is not None:
            problems.append(problem)
    return problems


def _callback_problems(callbacks: tuple[Source, ...]) -> list[Problem]:
    from ..engine.sinks import check_callback

    problems = []
    for i, cb in enumerate(callbacks):
        if cb.kind == "reference":  # checked by reference_problems
            continue
        if cb.kind == "factory":
            if takes_no_arguments(cb.obj) is False:
                problems.append(
                    Problem(
                        f"callbacks[{i}]",
                        cb.name,
                        "a callback factory is called with no argument; pass an "
                        "instance, or a function that builds one",
                    )
                )
            continue
        try:
            check_callback(cb.obj)
        except TypeError as exc:
            problems.append(Problem(f"callbacks[{i}]", cb.obj, str(exc).split(": ", 1)[-1]))
    return problems


def _net_problems(resolved: Resolved, values: Mapping[str, Any]) -> list[Problem]:
    """What no plan can build: a wrapped module's record (its instance cannot be made
    again), a spec whose factory is not registered here, a built-in network given no
    params, and the MLP's ``net.*`` fields set beside another network."""
    net = resolved.model.net
    if net is Nets.FEED_FWD:
        return []
    if isinstance(net, RuntimeModuleRef):
        return [Problem("model.net", f"a runtime module ({net.name})", RUNTIME_FIX)]
    problems = []
    travels = isinstance(values.get("model.net"), SpecWithFactory)  # resolve() registers it
    if isinstance(net, ModelSpec):
        registered = registered_model_factories()
        if not travels and (net.id, net.version) not in registered:
            known = ", ".join(f"{i!r} v{v}" for i, v in registered) or "none"
            problems.append(
                Problem(
                    "model.net",
                    repr(net),
                    f"no factory is registered as {net.id!r} version {net.version} in this "
                    f"process (registered: {known}); import the module that calls "
                    "register_model_factory(...) before the plan runs",
                )
            )
    elif resolved.net is None:
        cls = NET_PARAMS[net].__name__
        problems.append(
            Problem(
                "model.net",
                net.value,
                f"Nets.{net.name} is built from its params: plan.with_net({cls}(...))",
            )
        )
    what = "a ModelSpec" if isinstance(net, ModelSpec) else f"Nets.{net.name}"
    for path in values:
        if path.startswith("net."):
            problems.append(
                Problem(
                    path,
                    values[path],
                    f"the plan's network is {what}: the MLP's net.* fields do not apply; "
                    "drop them (plan.with_net(spec_or_params) removes them)",
                )
            )
    return problems


def _device_problems(model: NNModelParams) -> list[Problem]:
    device = model.device.value
    if device != "cpu":
        import torch  # only to ask whether the device exists

        present = (
            torch.cuda.is_available()
            if device == "cuda"
            else bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
        )
        if not present:
            return [
                Problem(
                    "model.device",
                    device,
                    f"no {device.upper()} device is present here; use Devices.get() or Devices.CPU",
                )
            ]
    policy = model.precision
    if policy is not None:
        ok, why = device_can_run(device, policy.mode)
        if not ok and policy.fallback != "fp32":
            return [
                Problem(
                    "model.precision",
                    policy.mode,
                    f"{why}; use PrecisionPolicy({policy.mode!r}, fallback='fp32') to train "
                    "in fp32 instead, or another mode (nnx_lab.precision_support())",
                )
            ]
    return []


def _resume_problems(train: NNTrainParams) -> list[Problem]:
    run_id = train.resume_from_run_id
    if run_id is None or not is_run_id(run_id):
        return []
    root = resolve_runs_root(train.runs_root)
    if (run_dir(root, run_id) / "run.yaml").is_file():
        return []
    return [
        Problem(
            "train.resume_from_run_id",
            run_id,
            f"no such run under {root.resolve()}; check the id, or set the runs root "
            "where it was written: plan.with_runs_root(...)",
        )
    ]
