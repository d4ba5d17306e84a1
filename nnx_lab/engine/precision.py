"""Precision policies (§2.2): fp32 / fp16 / bf16 with an optional fp32 fallback.

A policy is declared on ``NNModelParams(precision=...)`` and resolved against a device
twice: when the model is built and, afresh, before a run is reserved. Autocast wraps
only the forward pass and the loss; parameters stay float32.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, PrecisionUnsupportedError

__all__ = [
    "MODES",
    "REFERENCE_TOLERANCES",
    "PrecisionPolicy",
    "ResolvedPrecision",
    "normalize_policy",
    "precision_support",
    "resolve_precision",
]

MODES = ("fp32", "fp16", "bf16")
DEVICES = ("cpu", "cuda", "mps")

# Tolerances of the seeded reference fixtures (tests/python/engine/test_precision_reference.py):
# a policy's loss trajectory and final weights against a float64 reference run.
REFERENCE_TOLERANCES: dict[tuple[str, str], dict[str, float]] = {
    ("cpu", "fp32"): {"loss_rtol": 1e-5, "weight_atol": 1e-5},
    ("cpu", "bf16"): {"loss_rtol": 2e-2, "weight_atol": 5e-2},
    ("cuda", "fp32"): {"loss_rtol": 1e-3, "weight_atol": 1e-3},
    ("cuda", "fp16"): {"loss_rtol": 2e-2, "weight_atol": 2e-2},
    ("cuda", "bf16"): {"loss_rtol": 5e-2, "weight_atol": 5e-2},
}

# Cells checked by the reference fixtures on the machines that run the test suite.
_VERIFIED = {("cpu", "fp32"), ("cpu", "bf16")}

# The NNModel surfaces that apply a policy (iter_predict streams under "predict", or
# "predict_proba" when rich). The LR finder sweeps under the model's policy too.
SURFACES = ("train", "evaluate", "predict", "predict_proba", "lr_finder")

_NO_AUTOCAST = contextlib.nullcontext()


@dataclass(frozen=True)
class PrecisionPolicy:
    """``PrecisionPolicy("bf16")``, ``PrecisionPolicy("fp16", fallback="fp32")``."""

    mode: str = "fp32"
    fallback: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(
                "PrecisionPolicy.mode", self.mode, f"use one of {', '.join(repr(m) for m in MODES)}"
            )
        if self.fallback == "error":  # NNx's spelling of "no fallback: refuse"
            object.__setattr__(self, "fallback", None)
        if self.fallback not in (None, "fp32"):
            raise ConfigError(
                "PrecisionPolicy.fallback",
                self.fallback,
                "the only fallback is 'fp32' (or None to refuse instead)",
            )

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "fallback": self.fallback}

    def resolve(self, device: Any) -> ResolvedPrecision:
        """What this policy runs as on ``device`` (a type or a ``torch.device``): a
        ``ResolvedPrecision``, or ``PrecisionUnsupportedError`` (NNx's ``resolve``)."""
        import torch

        kind = torch.device(device).type
        return resolve_precision(normalize_policy(self, False), False, kind)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PrecisionPolicy:
        return cls(mode=data["mode"], fallback=data.get("fallback"))


def normalize_policy(policy: Any, mixed_precision: bool) -> PrecisionPolicy | None:
    """fp32 normalizes to no policy (so it keeps the default's run id)."""
    if policy is None:
        return None
    if isinstance(policy, str):
        policy = PrecisionPolicy(policy)
    if not isinstance(policy, PrecisionPolicy):
        raise ConfigError(
            "NNModelParams.precision",
            policy,
            "pass PrecisionPolicy('fp32' | 'fp16' | 'bf16') or None",
        )
    if mixed_precision and policy.mode != "fp16":
        raise ConfigError(
            "NNModelParams.mixed_precision",
            True,
            f"mixed_precision=True means fp16 and cannot combine with "
            f"PrecisionPolicy({policy.mode!r}); drop one of them",
        )
    return None if policy.mode == "fp32" else policy


def _cuda_native_bf16() -> bool:
    import torch

    if not torch.cuda.is_available():
        return False
    major, _ = torch.cuda.get_device_capability()
    return major >= 8


def device_can_run(device_type: str, mode: str) -> tuple[bool, str | None]:
    """Whether the device type can run ``mode``, and why not."""
    if mode == "fp32":
        return True, None
    if mode == "fp16":
        if device_type == "cuda":
            return True, None
        return False, f"fp16 needs a CUDA device (device is {device_type!r})"
    if device_type == "cpu":
        return True, None
    if device_type == "cuda":
        if _cuda_native_bf16():
            return True, None
        return False, "bf16 needs a CUDA device with native bf16 (compute capability 8.0+)"
    return False, f"bf16 is not supported on {device_type!r}"


def _tf32_state() -> dict[str, Any]:
    """TF32 as torch has it now: reported, never set by nnx_lab.

    The legacy switches (``allow_tf32``) and ``float32_matmul_precision`` are always
    reported; torch's newer ``fp32_precision`` settings are reported separately, and
    only when someone has made them (anything but torch's ``"none"``).
    """
    import warnings

    import torch

    state: dict[str, Any] = {"applies": bool(torch.cuda.is_available()), "set_by_nnx_lab": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch may warn about mixing the two APIs
        for name, read in (
            ("matmul_allow_tf32", lambda: torch.backends.cuda.matmul.allow_tf32),
            ("cudnn_allow_tf32", lambda: torch.backends.cudnn.allow_tf32),
            ("float32_matmul_precision", torch.get_float32_matmul_precision),
        ):
            try:
                value = read()
            except Exception:  # a backend that cannot answer reports None
                value = None
            state[name] = value if value is None or isinstance(value, str) else bool(value)
        made: dict[str, str] = {}
        for name, obj in (
            ("generic", torch.backends),
            ("cuda.matmul", torch.backends.cuda.matmul),
            ("cudnn", torch.backends.cudnn),
        ):
            try:
                value = getattr(obj, "fp32_precision", None)
            except Exception:
                value = None
            if isinstance(value, str) and value != "none":
                made[name] = value
    state["fp32_precision"] = made or None
    return state


@dataclass(frozen=True)
class ResolvedPrecision:
    """What a policy became on one device; ``record()`` is what runs save."""

    requested: str
    effective: str
    device_type: str
    fallback_reason: str | None = None
    legacy_mixed_precision: bool = False
    tf32: dict[str, Any] = field(default_factory=dict)

    @property
    def dtype(self) -> Any:
        import torch

        return {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}[self.effective]

    @property
    def uses_scaler(self) -> bool:
        return self.effective == "fp16"

    @property
    def reduced(self) -> bool:
        return self.effective != "fp32"

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Autocast for forward + loss; a shared no-op context in fp32 (hot path)."""
        if not self.reduced:
            return _NO_AUTOCAST
        import torch

        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def covers(self) -> list[str]:
        if self.legacy_mixed_precision:
            return ["train"]  # NNx's legacy flag never reached evaluation or prediction
        return list(SURFACES)

    def not_covered(self) -> list[str]:
        covered = set(self.covers())
        return [s for s in SURFACES if s not in covered]

    def record(self) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "effective": self.effective,
            "fallback_reason": self.fallback_reason,
            "device": self.device_type,
            "tf32": self.tf32,
            "covers": self.covers(),
            "not_covered": self.not_covered(),
        }

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> ResolvedPrecision:
        return cls(
            requested=data["requested"],
            effective=data["effective"],
            device_type=data.get("device", "cpu"),
            fallback_reason=data.get("fallback_reason"),
            legacy_mixed_precision="evaluate" not in data.get("covers", SURFACES),
            tf32=data.get("tf32") or {},
        )


def resolve_precision(
    policy: PrecisionPolicy | None, mixed_precision: bool, device_type: str
) -> ResolvedPrecision:
    """Resolve a (normalized) policy on a device, or raise PrecisionUnsupportedError."""
    tf32 = _tf32_state()
    if policy is None and mixed_precision:
        # Legacy meaning: fp16 autocast + scaler in training on CUDA, silently plain fp32
        # elsewhere, and no effect on evaluation or prediction.
        if device_type == "cuda":
            return ResolvedPrecision("fp16", "fp16", device_type, None, True, tf32)
        reason = (
            f"mixed_precision=True (legacy) means fp16 on CUDA only; on {device_type!r} it "
            "trains in plain fp32"
        )
        return ResolvedPrecision("fp16", "fp32", device_type, reason, True, tf32)
    if policy is None:
        return ResolvedPrecision("fp32", "fp32", device_type, None, False, tf32)
    # An explicit policy governs; mixed_precision=True next to PrecisionPolicy("fp16")
    # only repeats it (normalize_policy refuses any other combination).
    ok, why = device_can_run(device_type, policy.mode)
    if ok:
        return ResolvedPrecision(policy.mode, policy.mode, device_type, None, False, tf32)
    if policy.fallback == "fp32":
        reason = f"{why}; trained in fp32 as PrecisionPolicy(fallback='fp32') allows"
        return ResolvedPrecision(policy.mode, "fp32", device_type, reason, False, tf32)
    raise PrecisionUnsupportedError(
        f"precision={policy.mode!r} cannot run here: {why}. "
        f"Use PrecisionPolicy({policy.mode!r}, fallback='fp32') to train in fp32 instead, "
        "or pick a mode from nnx_lab.precision_support()"
    )


def precision_support(device: Any = None) -> dict[str, dict[str, str]]:
    """Each device x mode cell: verified / supported / unverified / unsupported.

    ``device`` (a device type such as ``"cuda"``, or a ``torch.device``) keeps that
    type's row only, as NNx's does; a type nnx-lab knows nothing of claims no reduced
    mode (fp32 unverified)."""
    import torch

    if device is not None:
        kind = torch.device(device).type  # an invalid name is torch's RuntimeError
        if kind not in DEVICES:
            return {kind: {"fp32": "unverified", "fp16": "unsupported", "bf16": "unsupported"}}
        return {kind: precision_support()[kind]}

    present = {
        "cpu": True,
        "cuda": torch.cuda.is_available(),
        "mps": bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()),
    }
    table: dict[str, dict[str, str]] = {}
    for device in DEVICES:
        row: dict[str, str] = {}
        for mode in MODES:
            if (device == "mps" and mode != "fp32") or (device == "cpu" and mode == "fp16"):
                row[mode] = "unsupported"
            elif not present[device]:
                row[mode] = "unverified"
            elif not device_can_run(device, mode)[0]:
                row[mode] = "unsupported"
            elif (device, mode) in _VERIFIED:
                row[mode] = "verified"
            else:
                row[mode] = "supported"
        table[device] = row
    return table
