"""Loading pretrained weights into a network (§3.1): ``load_pretrained``.

The source is a ``.safetensors`` file (read with the safetensors package), a ``.pt`` /
``.pth`` file (``torch.load(weights_only=True)`` only: no pickled code runs), a state
dict, a module, or an nnx-lab ``NNCheckpoint``. ``prefix`` keeps only the source keys
under it and strips it (``"backbone."``); ``key_map`` then renames keys (a dict, or a
callable returning the new key, or None to drop one). Every check runs before any
weight is copied, so a refused load leaves the module as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import ConfigError

__all__ = ["LoadPretrainedResult", "load_pretrained"]

_TORCH_SUFFIXES = (".pt", ".pth", ".bin")


@dataclass(frozen=True)
class LoadPretrainedResult:
    """The module's keys that were loaded, the module's keys the source lacks
    (``missing_keys``: they keep their values) and the source's keys the module lacks
    (``unexpected_keys``), each sorted."""

    loaded_keys: tuple[str, ...]
    missing_keys: tuple[str, ...]
    unexpected_keys: tuple[str, ...]


def _read_file(path: Path) -> Mapping[str, Any]:
    if not path.is_file():
        raise ConfigError("source", str(path), "no such file; pass a .safetensors or .pt path")
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path), device="cpu")
    if suffix in _TORCH_SUFFIXES:
        try:
            loaded = torch.load(str(path), map_location="cpu", weights_only=True)
        except Exception as exc:
            raise ConfigError(
                "source",
                str(path),
                f"torch.load(weights_only=True) refused it ({type(exc).__name__}); save the "
                "state_dict alone (a dict of tensors), or save it as safetensors",
            ) from None
        if isinstance(loaded, Mapping) and isinstance(loaded.get("state_dict"), Mapping):
            loaded = loaded["state_dict"]  # the common {"state_dict": ..., "epoch": ...} form
        if not isinstance(loaded, Mapping):
            raise ConfigError(
                "source", str(path), f"holds a {type(loaded).__name__}, not a state dict"
            )
        return loaded
    raise ConfigError(
        "source", str(path), "pass a .safetensors, .pt or .pth file (or a state dict, a module)"
    )


def _state_of(source: Any) -> Mapping[str, Any]:
    if isinstance(source, str | Path):
        return _read_file(Path(source))
    if isinstance(source, torch.nn.Module):
        return source.state_dict()
    net = getattr(source, "net", None)  # an NNModel
    if isinstance(net, torch.nn.Module):
        return net.state_dict()
    state = getattr(source, "model_state", None)  # an NNCheckpoint
    if isinstance(state, Mapping):
        return state
    if isinstance(source, Mapping):
        return source
    raise ConfigError(
        "source",
        type(source).__name__,
        "pass a .safetensors / .pt path, a state dict, a module, an NNModel or an NNCheckpoint",
    )


def _renamed(state: Mapping[str, Any], prefix: str | None, key_map: Any) -> dict[str, torch.Tensor]:
    if prefix is not None and (not isinstance(prefix, str) or not prefix):
        raise ConfigError("prefix", prefix, "pass the source keys' leading text, e.g. 'encoder.'")
    if key_map is not None and not (isinstance(key_map, Mapping) or callable(key_map)):
        raise ConfigError("key_map", key_map, "pass a dict {source key: module key} or a callable")
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if not isinstance(key, str):
            raise ConfigError("source", repr(key), "a state dict's keys are strings")
        if prefix is not None:
            if not key.startswith(prefix):
                continue  # not under the prefix: not selected
            key = key[len(prefix) :]
        if isinstance(key_map, Mapping):
            key = key_map.get(key, key)
        elif key_map is not None:
            key = key_map(key)
        if key is None:
            continue  # the key map dropped it
        if not isinstance(key, str):
            raise ConfigError("key_map", repr(key), "must give a string key (or None to drop)")
        if not isinstance(value, torch.Tensor):
            raise ConfigError(f"source[{key!r}]", type(value).__name__, "holds no tensor")
        if key in out:
            raise ConfigError("key_map", key, "two source keys map to this key; map them apart")
        out[key] = value
    return out


def load_pretrained(
    module: torch.nn.Module,
    source: Any,
    key_map: Mapping[str, str] | Callable[[str], str | None] | None = None,
    strict: bool = False,
    prefix: str | None = None,
) -> LoadPretrainedResult:
    """Copy the weights of ``source`` whose keys ``module`` has (after ``prefix`` and
    ``key_map``) into ``module`` (an ``nn.Module`` or an ``NNModel``).

    A shape mismatch is refused naming the key and both shapes; ``strict=True`` also
    refuses missing and unexpected keys. Nothing is copied unless every check passes.
    """
    net = getattr(module, "net", module)
    if not isinstance(net, torch.nn.Module):
        raise ConfigError("module", type(module).__name__, "pass an nn.Module or an NNModel")
    if not isinstance(strict, bool):
        raise ConfigError("strict", strict, "pass True or False")
    source_state = _renamed(_state_of(source), prefix, key_map)
    target = net.state_dict()
    loaded = sorted(k for k in source_state if k in target)
    missing = tuple(sorted(k for k in target if k not in source_state))
    unexpected = tuple(sorted(k for k in source_state if k not in target))
    reshaped = [
        f"{key} {tuple(source_state[key].shape)} vs the module's {tuple(target[key].shape)}"
        for key in loaded
        if tuple(source_state[key].shape) != tuple(target[key].shape)
    ]
    if reshaped:  # every mismatch in one refusal
        raise ConfigError(
            "source",
            f"{len(reshaped)} key(s) of another shape",
            f"{'; '.join(reshaped[:8])}; map such a key elsewhere (key_map) or drop it "
            "(key_map returning None); nothing was loaded",
        )
    if strict and (missing or unexpected):
        raise ConfigError(
            "strict",
            True,
            f"missing keys {list(missing)[:8]}, unexpected keys {list(unexpected)[:8]}; "
            "fix prefix / key_map, or pass strict=False; nothing was loaded",
        )
    if not loaded:
        raise ConfigError(
            "source",
            f"{len(source_state)} keys",
            f"none matches the module's keys (e.g. {list(target)[:3]}); fix prefix / key_map",
        )
    with torch.no_grad():
        for key in loaded:
            target[key].copy_(source_state[key])  # state_dict tensors share the module's storage
    return LoadPretrainedResult(tuple(loaded), missing, unexpected)
