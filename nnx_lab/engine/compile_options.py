"""``NNModelParams(compile=...)``: torch.compile on request.

The options are checked where they enter (``normalize_compile``, torch-free: params stay
importable without torch) and again against the installed torch before a run
(``check_compile``). ``same_numbers`` says whether the options leave every computed
number as eager PyTorch gives it: only then do compiled and eager runs share a run id.
The network is compiled once per model (``compiled_net``); the eager module keeps the
weights, so checkpoints hold its ``state_dict`` (no ``_orig_mod.`` prefix).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError

__all__ = ["CompileOptions", "check_compile", "compiled_net", "normalize_compile", "same_numbers"]

FIELD = "NNModelParams.compile"
MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# Backends that run the very ATen kernels eager PyTorch runs, in its order: the graph is
# captured, the arithmetic is not changed. Inductor (the default) generates fused kernels
# whose float reductions may round differently, so its runs get an id of their own.
SAME_NUMBER_BACKENDS = ("eager", "aot_eager")
_FIX = (
    "pass True, False, or a dict of torch.compile options: fullgraph (bool), dynamic "
    "(bool or None), backend (a name, e.g. 'inductor' or 'aot_eager'), mode (one of "
    f"{', '.join(repr(m) for m in MODES)}), options (a dict of inductor settings; not with "
    "mode), disable (bool); e.g. {'mode': 'max-autotune'}"
)


class CompileOptions(dict):
    """The options as a dict that cannot change and hashes by content (frozen params)."""

    __slots__ = ()

    def _immutable(self, *_: Any, **__: Any) -> None:
        raise TypeError("compile options are immutable; build new params with .replace(...)")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _immutable  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(json.dumps(self, sort_keys=True, default=str))

    def __copy__(self) -> CompileOptions:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> CompileOptions:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (CompileOptions, (dict(self),))


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def normalize_compile(value: Any) -> bool | CompileOptions:
    """``False``, or the options (``True`` is ``{}``: torch.compile's defaults)."""
    if value is False:
        return False
    if value is True:
        return CompileOptions()
    if not isinstance(value, Mapping):  # a plan holds its dicts read-only
        raise ConfigError(FIELD, value, _FIX)
    value = {k: dict(v) if isinstance(v, Mapping) else v for k, v in value.items()}
    checks = {
        "fullgraph": lambda v: isinstance(v, bool),
        "dynamic": lambda v: v is None or isinstance(v, bool),
        "backend": lambda v: isinstance(v, str) and v.strip() != "",
        "mode": lambda v: v in MODES,
        "options": lambda v: (
            isinstance(v, dict) and all(isinstance(k, str) and _plain(x) for k, x in v.items())
        ),
        "disable": lambda v: isinstance(v, bool),
    }
    for key, option in value.items():
        if key not in checks:
            raise ConfigError(FIELD, value, f"{key!r} is not a torch.compile option; {_FIX}")
        if not checks[key](option):
            raise ConfigError(f"{FIELD}[{key!r}]", option, _FIX)
    if value.get("mode") is not None and value.get("options"):
        raise ConfigError(FIELD, value, f"torch.compile takes mode or options, not both; {_FIX}")
    return CompileOptions(value)


def same_numbers(options: Any) -> bool:
    """Whether a run with these options computes the eager run's numbers bit for bit."""
    if options is False or options.get("disable"):
        return True
    return options.get("backend") in SAME_NUMBER_BACKENDS and not options.get("options")


def check_compile(options: Any, distributed: Any) -> None:
    """Refuse, before any run, what this torch cannot compile as asked."""
    if options is False or options.get("disable"):
        return
    import torch

    if distributed is not None:
        raise ConfigError(
            FIELD,
            dict(options),
            "a data-parallel run (distributed=) trains the DDP-wrapped network, which is "
            "not compiled here; pass compile=False for it",
        )
    if not torch._dynamo.is_dynamo_supported():
        raise ConfigError(
            FIELD,
            dict(options),
            "torch.compile does not support this Python or platform; pass compile=False",
        )
    backend = options.get("backend")
    if backend is not None:
        known = torch._dynamo.list_backends(exclude_tags=())
        if backend not in known:
            raise ConfigError(
                f"{FIELD}['backend']",
                backend,
                f"not a torch.compile backend here; pick one of {', '.join(sorted(known))}",
            )


def compiled_net(owner: Any, net: Any, options: Any) -> Any:
    """``net`` compiled with ``options``, once per owner (the model) and options; the
    eager ``net`` itself when compile is off."""
    if options is False or options.get("disable"):
        return net
    cached = owner.__dict__.get("_compiled_net")
    if cached is not None and cached[0] is net and cached[1] == options:
        return cached[2]
    import torch

    compiled = torch.compile(net, **options)
    owner.__dict__["_compiled_net"] = (net, options, compiled)
    return compiled
