"""Where a reference's module is, found without running it; and the one place a
reference is imported.

``check_reference`` is what ``validate()`` asks of a plan read from JSON: whether each
reference may be resolved and would resolve, answered without executing anything of
the module (or of its parent packages). The module is found the way ``import`` would
find it (this process's ``sys.path`` and finders), but only its spec is looked up, and
the name it must define is looked for in its source text (``ast``), unless the module
is already loaded, where the name is read from it.

Where the module's file sits decides too: a module inside a runs root (the plan's, the
``NNX_RUNS_ROOT`` one, ``./runs``) or inside any run folder (a folder named by a run id,
or a launch folder) is refused. A runs folder is data someone may have shared; the
folders Python searches (the notebook's own, the installed packages) are the user's.

``import_reference`` imports: it runs only from ``plan.resolve()`` (which ``fit()``,
``lr_finder()``, ``probe()`` and the launcher's workers call first), after every
reference of the plan passed ``check_reference``.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import inspect
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..runs import is_run_id, resolve_runs_root
from ._refs import Reference, refusal

__all__ = ["check_reference", "import_reference", "runs_roots"]

_MAX_SOURCE_BYTES = 8 << 20  # a module's source read to look for a name


def runs_roots(plan_root: Any) -> tuple[Path, ...]:
    """The runs roots a plan's code may not come from: the plan's, the environment's
    (``NNX_RUNS_ROOT``) and the default ``./runs``."""
    roots = []
    for root in (plan_root, None):
        try:
            path = resolve_runs_root(root).resolve()
        except (OSError, TypeError, ValueError):
            continue
        if path not in roots:
            roots.append(path)
    return tuple(roots)


def _confined(path: str | Path, roots: Iterable[Path]) -> str | None:
    """Why code at ``path`` may not run (it sits in a runs root or a run folder)."""
    try:
        where = Path(path).resolve()
    except (OSError, RuntimeError):
        return f"its file {path} cannot be located"
    for root in roots:
        if where == root or root in where.parents:
            return f"its file {where} is inside the runs root {root}"
    for folder in where.parents:
        if is_run_id(folder.name) or folder.name == ".launches":
            return f"its file {where} is inside the run folder {folder}"
    return None


def _spec_files(spec: Any) -> Iterator[str]:
    if spec is None:
        return
    if spec.origin and spec.origin not in ("built-in", "frozen") and spec.has_location:
        yield spec.origin
    yield from spec.submodule_search_locations or ()


def _find_spec(name: str, path: list[str] | None) -> Any:
    """The spec the import system would use for ``name``, asked of its finders only (no
    module runs; a parent package is never imported to find a child)."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(name, path)
        except Exception:
            continue
        if spec is not None:
            return spec
    return None


def _locate(module: str, roots: tuple[Path, ...]) -> tuple[Any, str | None]:
    """(the module's spec, or None; why it is refused or not found, or None)."""
    parts = module.split(".")
    path: list[str] | None = None
    spec = None
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        loaded = sys.modules.get(name)
        spec = getattr(loaded, "__spec__", None) if loaded is not None else None
        if spec is None and loaded is None:
            spec = _find_spec(name, path)
        if spec is None and loaded is None:
            return None, (
                f"module {module!r} cannot be imported: {name!r} is not found on this "
                "process's sys.path; install it, or put its folder on sys.path"
            )
        files = list(_spec_files(spec))
        if loaded is not None and getattr(loaded, "__file__", None):
            files.append(loaded.__file__)
        for file in files:
            why = _confined(file, roots)
            if why is not None:
                return spec, (
                    f"{why}; a runs folder holds data, and nnx_lab never runs code from "
                    "it: move the module out of the runs root (into your project) and "
                    "name it there"
                )
        path = list(getattr(spec, "submodule_search_locations", None) or []) or None
        if path is None and loaded is not None:
            path = list(getattr(loaded, "__path__", None) or []) or None
        if path is None and i < len(parts):
            return None, f"{name!r} is a module, not a package: it has no {parts[i]!r}"
    return spec, None


def _top_level_names(source: bytes) -> set[str] | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    names: set[str] = set()
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
            for block in ("body", "orelse", "finalbody"):
                stack.extend(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                stack.extend(handler.body)
    return names


def _has_name(spec: Any, module: str, qualname: str) -> bool | None:
    """Whether ``module`` defines ``qualname`` at its top level (None: cannot tell
    without running it, e.g. a compiled extension)."""
    loaded = sys.modules.get(module)
    if loaded is not None:
        obj = vars(loaded).get(qualname)
        return obj is not None and (inspect.isfunction(obj) or inspect.isclass(obj))
    origin = getattr(spec, "origin", None)
    if not origin or not str(origin).endswith(".py"):
        return None
    try:
        with open(origin, "rb") as fh:
            source = fh.read(_MAX_SOURCE_BYTES + 1)
    except OSError:
        return None
    if len(source) > _MAX_SOURCE_BYTES:
        return None
    names = _top_level_names(source)
    return None if names is None else qualname in names


def check_reference(ref: Reference, roots: tuple[Path, ...]) -> str | None:
    """Why ``ref`` may not be resolved or would not resolve (the fix), or None. Runs
    nothing of the module it names."""
    refused = refusal(ref.module, ref.qualname)
    if refused is not None:
        return refused
    spec, why = _locate(ref.module, roots)
    if why is not None:
        return why
    if _has_name(spec, ref.module, ref.qualname) is False:
        return (
            f"module {ref.module!r} has no {ref.qualname!r} (a top-level function or "
            "class); check the name"
        )
    return None


def import_reference(ref: Reference, field: str, roots: tuple[Path, ...]) -> Any:
    """The function or class ``ref`` names, its module imported (its code runs): the
    explicit step. Checked first as ``check_reference`` checks; a ConfigError naming
    ``field`` otherwise."""
    why = check_reference(ref, roots)
    if why is not None:
        raise ConfigError(field, ref.text, why)
    try:
        mod = importlib.import_module(ref.module)
    except Exception as exc:
        raise ConfigError(
            field,
            ref.text,
            f"module {ref.module!r} cannot be imported ({type(exc).__name__}: {exc}); make "
            "it importable in this process (install it, or put its folder on sys.path)",
        ) from None
    obj = vars(mod).get(ref.qualname)
    if obj is None:
        raise ConfigError(
            field, ref.text, f"module {ref.module!r} has no {ref.qualname!r}; check the name"
        )
    if not (inspect.isfunction(obj) or inspect.isclass(obj)):
        raise ConfigError(
            field,
            ref.text,
            f"{ref.name} is a {type(obj).__name__}, not a function or class; a reference "
            "names a top-level function or class",
        )
    if obj.__module__ != ref.module or obj.__qualname__ != ref.qualname:
        raise ConfigError(
            field,
            ref.text,
            f"{ref.name} is {obj.__module__}.{obj.__qualname__}, imported there; name it "
            f"where it is defined: '{obj.__module__}:{obj.__qualname__}'",
        )
    return obj
