"""Fine-tuning rules for the optimizer (§3.1): ``NNParamGroupSpec`` and how a network's
parameters are split into the optimizer's groups.

A rule names parameters by a glob on their dotted names (``fnmatch.fnmatchcase``: ``*``
crosses dots, so ``encoder.*`` is the whole encoder). Rules are tried in order and the
first match wins; they never merge, so a specific rule goes before a general one. Frozen
parameters (``requires_grad`` False) belong to no group and get no optimizer state;
the trainable parameters no rule matched form the default group, which comes first
(so the learning rate a run reports is the default's).

A rule that ends up with no parameter is refused before any run, naming the nearest
parameter names: NNx keeps such a rule as a silently empty group.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from ..errors import DIFFERENCES_DOC, ConfigError
from .params_base import FLOAT32_MAX, Params, finite, set_field

if TYPE_CHECKING:  # the params (and so the widgets that show them) import without torch
    import torch

__all__ = [
    "DEFAULT_RULE",
    "NNParamGroupSpec",
    "ParameterRule",
    "coerce_group_specs",
    "near_names",
    "optimizer_groups",
    "parameter_rules",
]

DEFAULT_RULE = "default"


@dataclass(frozen=True)
class NNParamGroupSpec(Params):
    """One fine-tuning rule: the parameters whose dotted name matches ``name_pattern``
    train with ``lr`` (absolute) or ``lr_multiplier`` times the optimizer's ``max_lr``
    (not both), and with ``weight_decay`` (None: the optimizer's)."""

    name_pattern: str
    lr: float | None = None
    lr_multiplier: float | None = None
    weight_decay: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name_pattern, str) or not self.name_pattern.strip():
            raise ConfigError(
                "NNParamGroupSpec.name_pattern",
                self.name_pattern,
                "pass a glob on dotted parameter names, e.g. 'encoder.*' or '*.bias'",
            )
        if self.lr is not None and self.lr_multiplier is not None:
            raise ConfigError(
                "NNParamGroupSpec.lr",
                self.lr,
                f"give lr or lr_multiplier, not both (lr_multiplier={self.lr_multiplier})",
            )
        for name, fix in (
            ("lr", "pass a learning rate > 0, e.g. 1e-4, or None"),
            ("lr_multiplier", "pass a factor > 0 of the optimizer's max_lr, e.g. 0.1, or None"),
        ):
            value = getattr(self, name)
            if value is not None:
                checked = finite(
                    value,
                    f"NNParamGroupSpec.{name}",
                    low=0.0,
                    high=FLOAT32_MAX,
                    low_open=True,
                    fix=fix,
                )
                set_field(self, name, checked)
        if self.weight_decay is not None:
            checked = finite(
                self.weight_decay,
                "NNParamGroupSpec.weight_decay",
                low=0.0,
                high=FLOAT32_MAX,
                fix="pass a weight decay >= 0, e.g. 0.0, or None for the optimizer's",
            )
            set_field(self, "weight_decay", checked)

    def effective_lr(self, max_lr: float) -> float:
        if self.lr is not None:
            return self.lr
        return max_lr * (1.0 if self.lr_multiplier is None else self.lr_multiplier)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NNParamGroupSpec:
        return cls(**data)


def coerce_group_specs(value: Any) -> tuple[NNParamGroupSpec, ...]:
    """``NNOptimParams.param_groups`` as a tuple of specs; a dict (a plan's JSON) is
    read as a spec's fields."""
    field = "NNOptimParams.param_groups"
    if value is None:
        return ()
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise ConfigError(field, value, "pass a list of NNParamGroupSpec(...), first match wins")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, Mapping):
            unknown = sorted(set(item) - {"name_pattern", "lr", "lr_multiplier", "weight_decay"})
            if unknown or "name_pattern" not in item:
                raise ConfigError(
                    f"{field}[{i}]",
                    dict(item),
                    "a rule has name_pattern and optional lr, lr_multiplier, weight_decay"
                    + (f" (unknown: {', '.join(map(str, unknown))})" if unknown else ""),
                )
            item = NNParamGroupSpec.from_json(dict(item))
        if not isinstance(item, NNParamGroupSpec):
            raise ConfigError(
                f"{field}[{i}]", item, "pass NNParamGroupSpec(name_pattern=..., ...) items"
            )
        out.append(item)
    return tuple(out)


@dataclass(frozen=True)
class ParameterRule:
    """What the rules decided for one parameter: the ``rule`` that matched it (its
    pattern, or "default"; None for a frozen one), its effective ``lr`` and
    ``weight_decay`` (None when frozen) and ``frozen``."""

    name: str
    rule: str | None
    lr: float | None
    weight_decay: float | None
    frozen: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rule": self.rule,
            "lr": self.lr,
            "weight_decay": self.weight_decay,
            "frozen": self.frozen,
        }


def near_names(pattern: str, names: list[str], n: int = 5) -> list[str]:
    """The parameter names closest to ``pattern`` (its glob characters aside)."""
    plain = pattern.replace("*", "").replace("?", "").strip(".")
    close = difflib.get_close_matches(pattern, names, n=n, cutoff=0.3)
    close += [m for m in difflib.get_close_matches(plain, names, n=n, cutoff=0.3) if m not in close]
    return close[:n] or names[:n]


def _refuse_empty(index: int, spec: NNParamGroupSpec, named: dict[str, Any], why: str) -> None:
    trainable = [n for n, p in named.items() if p.requires_grad]
    near = near_names(spec.name_pattern, trainable or list(named))
    raise ConfigError(
        f"NNOptimParams.param_groups[{index}].name_pattern",
        spec.name_pattern,
        f"{why}; the nearest trainable parameter names: {', '.join(near) or '(none)'} "
        "(check model.net.named_parameters(); '*' crosses dots; NNx would keep it as an "
        f"empty group: {DIFFERENCES_DOC})",
    )


def _assign(net: torch.nn.Module, optim: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """Each parameter's rule index (-1: the default group; frozen ones absent), with
    every rule that gets no parameter refused."""
    specs = getattr(optim, "param_groups", ())
    named = dict(net.named_parameters())
    assigned: dict[str, int] = {}
    for name, p in named.items():
        if not p.requires_grad:
            continue
        assigned[name] = next(
            (i for i, s in enumerate(specs) if fnmatchcase(name, s.name_pattern)), -1
        )
    used = set(assigned.values())
    for i, spec in enumerate(specs):
        if i in used:
            continue
        matches = [n for n in named if fnmatchcase(n, spec.name_pattern)]
        if not matches:
            _refuse_empty(i, spec, named, "matches no parameter of the network")
        elif all(not named[n].requires_grad for n in matches):
            _refuse_empty(i, spec, named, f"matches only frozen parameters ({len(matches)})")
        else:
            first = min(assigned[n] for n in matches if n in assigned)
            _refuse_empty(
                i,
                spec,
                named,
                f"every parameter it matches is taken by the earlier rule "
                f"param_groups[{first}] ({specs[first].name_pattern!r}); put it first",
            )
    return named, assigned


def _settings(optim: Any, index: int) -> tuple[float, float]:
    if index < 0:
        return float(optim.max_lr), float(optim.weight_decay)
    spec = optim.param_groups[index]
    wd = optim.weight_decay if spec.weight_decay is None else spec.weight_decay
    return float(spec.effective_lr(optim.max_lr)), float(wd)


def optimizer_groups(net: torch.nn.Module, optim: Any) -> list[dict[str, Any]]:
    """The optimizer's parameter groups for ``optim`` (an ``NNOptimParams``): the
    default group first, then one per rule in rule order, each ``{"params", "lr",
    "weight_decay"}``; empty groups are left out. Refuses a rule with no parameter."""
    named, assigned = _assign(net, optim)
    groups: dict[int, list[torch.nn.Parameter]] = {}
    for name, index in assigned.items():
        groups.setdefault(index, []).append(named[name])
    out = []
    for index in sorted(groups):  # -1, the default group, first
        lr, wd = _settings(optim, index)
        out.append({"params": groups[index], "lr": lr, "weight_decay": wd})
    return out


def parameter_rules(net: torch.nn.Module, optim: Any) -> tuple[ParameterRule, ...]:
    """Per parameter, in ``named_parameters()`` order, what the rules decided."""
    named, assigned = _assign(net, optim)
    out = []
    for name in named:
        if name not in assigned:
            out.append(ParameterRule(name, None, None, None, True))
            continue
        index = assigned[name]
        lr, wd = _settings(optim, index)
        rule = DEFAULT_RULE if index < 0 else optim.param_groups[index].name_pattern
        out.append(ParameterRule(name, rule, lr, wd, False))
    return tuple(out)
