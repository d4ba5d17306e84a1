"""Saving and loading only the adapter tensors, tied to the base they were trained on.

``save_lora_weights(model, path)`` writes one safetensors file with every adapter
layer's trainable tensors (LoRA, DoRA, IA3, ``AdapterLayer``, prefix and prompt tuners)
under their dotted names in the model, and in its metadata: the format, each adapter
layer's kind and settings, the SHA-256 of the tensors themselves (an edited or damaged
file is refused) and the base fingerprint, the SHA-256 of the frozen tensors the
adapters modify (names, dtypes, shapes, values). ``load_lora_weights(model, path)``
checks all of it against the model before copying a single value: adapters trained on
another base, or of another shape or kind, are refused. The file is data: loading never
imports or calls anything it names. Written through the one atomic writer.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import torch

from ..engine.safetensors_io import encode
from ..errors import AdapterFileError, AdapterMismatchError, ConfigError
from ..runs import atomic_write_bytes
from ._base import net_of, peft_layers

__all__ = ["base_fingerprint", "load_lora_weights", "save_lora_weights"]

FORMAT = "nnx_lab.peft.adapters/1"


def _joined(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _collect(net: torch.nn.Module, attr: str) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for path, layer in peft_layers(net):
        for name, tensor in getattr(layer, attr)().items():
            out[_joined(path, name)] = tensor
    return out


def _bytes(t: torch.Tensor) -> bytes:
    t = t.detach().cpu().contiguous()
    return t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def _digest(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name]
        h.update(f"{name}|{str(t.dtype).removeprefix('torch.')}|{list(t.shape)}|".encode())
        h.update(_bytes(t))
    return h.hexdigest()


def _layers(net: torch.nn.Module) -> dict[str, Any]:
    return {
        path: {"kind": layer.adapter_kind, "config": layer.adapter_config()}
        for path, layer in peft_layers(net)
    }


def base_fingerprint(module: Any) -> str:
    """The SHA-256 of the frozen tensors ``module``'s adapters modify (each wrapped
    linear's weight and bias, a tuner's network): what a saved file is tied to."""
    return _digest(_collect(net_of(module), "base_tensors"))


def _adapters_of(module: Any, where: str) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    net = net_of(module, f"{where}(module)")
    tensors = _collect(net, "adapter_tensors")
    if not tensors:
        raise ConfigError(
            f"{where}(module)",
            type(net).__name__,
            "it has no adapter layer (apply_lora_to / apply_dora_to / apply_ia3_to first)",
        )
    return net, tensors


def save_lora_weights(model_or_module: Any, path: str | os.PathLike[str]) -> Path:
    """Write the adapter tensors of ``model_or_module`` to ``path`` (safetensors); the
    path. Nothing is written for a refused call."""
    net, tensors = _adapters_of(model_or_module, "save_lora_weights")
    target = Path(path)
    if not target.parent.is_dir():
        raise ConfigError(
            "save_lora_weights(path)", str(path), "its folder does not exist: create it first"
        )
    if target.is_dir():
        raise ConfigError("save_lora_weights(path)", str(path), "is a folder: pass a file path")
    metadata = {
        "format": FORMAT,
        "adapters": json.dumps(_layers(net), sort_keys=True),
        "base_fingerprint": base_fingerprint(net),
        "tensors_sha256": _digest(tensors),
    }
    atomic_write_bytes(target, encode({k: v.detach() for k, v in tensors.items()}, metadata))
    return target


def _read(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    from safetensors.torch import load as load_tensors

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise AdapterFileError(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        (size,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + size])
        tensors = load_tensors(data)
    except Exception as exc:  # any damage reads as one refusal
        raise AdapterFileError(path, f"is not a safetensors file ({type(exc).__name__})") from None
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise AdapterFileError(path, f"is not an adapter file of nnx-lab (format {FORMAT})")
    if _digest(tensors) != meta.get("tensors_sha256"):
        raise AdapterFileError(path, "its tensors do not match the digest they were saved with")
    return tensors, meta


def load_lora_weights(model_or_module: Any, path: str | os.PathLike[str]) -> tuple[str, ...]:
    """Copy the adapter tensors saved at ``path`` into ``model_or_module``'s adapter
    layers (apply the same adapters first); the names loaded. Refused, before any value
    is copied, when the file is damaged or edited, when its adapters differ from the
    model's (kinds, settings, names, shapes) or when it was trained on another base."""
    net, mine = _adapters_of(model_or_module, "load_lora_weights")
    path = Path(path)
    tensors, meta = _read(path)
    field = "load_lora_weights(module)"
    saved_layers, current = json.loads(meta.get("adapters", "{}")), _layers(net)
    if saved_layers != current:
        paths = sorted(set(saved_layers) | set(current))
        diff = [
            f"{p or '(root)'}: saved {saved_layers.get(p)}, module {current.get(p)}"
            for p in paths
            if saved_layers.get(p) != current.get(p)
        ][:3]
        raise AdapterMismatchError(
            field,
            type(net).__name__,
            f"{path} holds other adapters than the module's (first differences: {diff}); "
            "apply the adapters it was saved with (the same patterns, r, alpha) first",
        )
    missing, unexpected = sorted(set(mine) - set(tensors)), sorted(set(tensors) - set(mine))
    reshaped = [n for n in mine if n in tensors and tensors[n].shape != mine[n].shape]
    if missing or unexpected or reshaped:
        raise AdapterMismatchError(
            field,
            type(net).__name__,
            f"{path} does not fit: missing {missing[:5]}, unexpected {unexpected[:5]}, "
            f"other shapes {reshaped[:5]}",
        )
    if meta.get("base_fingerprint") != base_fingerprint(net):
        raise AdapterMismatchError(
            field,
            type(net).__name__,
            f"{path} was trained on another base model (its base fingerprint "
            f"{str(meta.get('base_fingerprint'))[:12]} is not this module's "
            f"{base_fingerprint(net)[:12]}); load the base weights it was trained on first",
        )
    with torch.no_grad():
        for name, tensor in mine.items():
            tensor.copy_(tensors[name])
    return tuple(mine)
