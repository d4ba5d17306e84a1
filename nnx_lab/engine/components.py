"""Components (§2.3): objects whose own state travels with every checkpoint.

A component defines ``component_spec()`` (a ``ComponentSpec``: name, version,
required), ``component_state()`` (a nested state of tensors, numbers, strings, lists
and dicts) and ``load_component_state(state, version=...)``. Its state is saved in the
training state under ``component:<name>`` with the version that wrote it: tensors in
safetensors, the rest in JSON (``_codec``: no pickle). On a stateful resume every saved
state is checked against this call's components before any is loaded (a required one
missing, a state no component takes, a version newer than the code, a component's own
``check_component_state``), and every problem is listed in one
``ComponentRestoreError``; then each is loaded, after the callbacks' reset hooks.
The older ``state_dict()`` / ``load_state_dict()`` objects keep their own path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ComponentRestoreError, ConfigError

__all__ = [
    "ComponentSpec",
    "capture_components",
    "check_components",
    "component_spec",
    "is_component",
    "restore_components",
]

PREFIX = "component:"


@dataclass(frozen=True)
class ComponentSpec:
    name: str
    version: int = 1
    required: bool = True


def is_component(obj: Any) -> bool:
    return all(
        callable(getattr(obj, m, None))
        for m in ("component_spec", "component_state", "load_component_state")
    )


def component_spec(obj: Any) -> ComponentSpec:
    """The object's spec, as a ``ComponentSpec`` (a tuple or mapping is accepted)."""
    raw = obj.component_spec()
    if isinstance(raw, ComponentSpec):
        spec = raw
    elif isinstance(raw, dict):
        spec = ComponentSpec(**raw)
    else:
        spec = ComponentSpec(*raw)
    if not isinstance(spec.name, str) or not spec.name:
        raise ConfigError(
            f"{type(obj).__qualname__}.component_spec().name", spec.name, "a non-empty string"
        )
    if not isinstance(spec.version, int) or spec.version < 1:
        raise ConfigError(
            f"{type(obj).__qualname__}.component_spec().version", spec.version, "an int >= 1"
        )
    return spec


def check_unique(objects: Sequence[Any]) -> None:
    """Two components of one name would overwrite each other's state: refused."""
    seen: dict[str, str] = {}
    for obj in objects:
        if not is_component(obj):
            continue
        name = component_spec(obj).name
        if name in seen:
            raise ConfigError(
                "components",
                name,
                f"two components ({seen[name]} and {type(obj).__qualname__}) share the "
                "name; give each its own component_spec().name",
            )
        seen[name] = type(obj).__qualname__


def capture_components(objects: Sequence[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for obj in objects:
        if is_component(obj):
            spec = component_spec(obj)
            out[PREFIX + spec.name] = {
                "version": spec.version,
                "required": spec.required,
                "state": obj.component_state(),
            }
    return out


def check_components(objects: Sequence[Any], saved: dict[str, Any]) -> None:
    """Every problem of restoring ``saved`` into ``objects``, in one error."""
    live = {component_spec(o).name: o for o in objects if is_component(o)}
    stored = {k[len(PREFIX) :]: v for k, v in saved.items() if k.startswith(PREFIX)}
    problems: list[str] = []
    for name, obj in live.items():
        spec = component_spec(obj)
        if name not in stored:
            if spec.required:
                problems.append(
                    f"component {name!r} is required but the checkpoint holds no state for it "
                    "(the run was trained without it): pass required=False to start it fresh"
                )
            continue
        entry = stored[name]
        version = int(entry.get("version", 1))
        if version > spec.version:
            problems.append(
                f"component {name!r}: the checkpoint's state is version {version}, newer than "
                f"this code's {spec.version}; update the component's code"
            )
            continue
        check = getattr(obj, "check_component_state", None)
        if callable(check):
            problems += [f"component {name!r}: {p}" for p in check(entry["state"], version) or ()]
    for name, entry in stored.items():
        if name not in live and entry.get("required", True):
            problems.append(
                f"the checkpoint holds the state of component {name!r}, which this train() "
                "call does not pass: pass it in components= to continue exactly"
            )
    if problems:
        raise ComponentRestoreError(problems)


def restore_components(objects: Sequence[Any], saved: dict[str, Any]) -> list[str]:
    check_components(objects, saved)
    restored = []
    for obj in objects:
        if not is_component(obj):
            continue
        name = component_spec(obj).name
        entry = saved.get(PREFIX + name)
        if entry is not None:
            obj.load_component_state(entry["state"], version=int(entry.get("version", 1)))
            restored.append(name)
    return restored
