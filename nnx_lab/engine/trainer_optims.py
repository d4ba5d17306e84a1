"""The Trainer's named optimizers (§3.2): who owns which parameter, the optimizers and
schedulers as one checkpointed component, and the update that steps all of them.

``owned_groups`` gives each optimizer the trainable parameters its ``param_groups``
select (an overlap, and a trainable parameter no optimizer selects, refused naming
them). ``NamedOptimizers`` builds the optimizers and schedulers and carries their state
with every checkpoint (the component ``"trainer"``), with each optimizer's update
count. ``NamedUpdater`` is the engine's ``Updater`` for an objective trained by several
optimizers: one backward pass, then every optimizer steps the parameters it owns, in
the policy's order (unscale, normalize, finite check, each optimizer's own clip, step).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..errors import ConfigError
from .components import ComponentSpec
from .grad_ops import clip_grad_norm, zero_grad
from .optim import build_optimizer, build_scheduler, load_optimizer_state
from .param_groups import DEFAULT_RULE, parameter_rules
from .trainer_params import NNTrainerParams
from .update import Updater

__all__ = ["NamedOptimizers", "NamedUpdater", "owned_groups"]


def owned_groups(net: torch.nn.Module, params: NNTrainerParams) -> dict[str, list[dict[str, Any]]]:
    """Per optimizer, its parameter groups (one per rule, rule order), with overlaps and
    trainable parameters no optimizer owns refused, naming them."""
    owner: dict[str, str] = {}
    out: dict[str, list[dict[str, Any]]] = {}
    named = dict(net.named_parameters())
    for key, optim in params.optims.items():
        try:
            rules = parameter_rules(net, optim)
        except ConfigError as exc:  # name the optimizer the rule belongs to
            raise ConfigError(
                f"NNTrainerParams.optims[{key!r}].{exc.field.split('.', 1)[1]}", exc.value, exc.fix
            ) from None
        by_rule: dict[str, dict[str, Any]] = {}
        for rule in rules:
            if rule.frozen or rule.rule == DEFAULT_RULE:
                continue
            if rule.name in owner:
                raise ConfigError(
                    f"NNTrainerParams.optims[{key!r}].param_groups",
                    rule.name,
                    f"parameter {rule.name!r} is selected by both optimizer "
                    f"{owner[rule.name]!r} and optimizer {key!r}; each parameter has one "
                    "owner: narrow one optimizer's NNParamGroupSpec globs",
                )
            owner[rule.name] = key
            group = by_rule.setdefault(
                rule.rule, {"params": [], "lr": rule.lr, "weight_decay": rule.weight_decay}
            )
            group["params"].append(named[rule.name])
        out[key] = list(by_rule.values())
    orphans = [n for n, p in named.items() if p.requires_grad and n not in owner]
    if orphans:
        raise ConfigError(
            "NNTrainerParams.optims",
            orphans[:5],
            f"{len(orphans)} trainable parameter(s) no optimizer owns (first: "
            f"{orphans[0]!r}); add an NNParamGroupSpec glob for them to one optimizer, or "
            "freeze them (model.freeze(...)) to leave them untrained",
        )
    return out


class NamedOptimizers:
    """The optimizers and schedulers by name around ``inner`` (the user's step function
    or objective), and their state as the run's component ``"trainer"``."""

    def __init__(self, net: torch.nn.Module, params: NNTrainerParams, inner: Any) -> None:
        self.inner, self.params = inner, params
        groups = owned_groups(net, params)
        self.optimizers = {k: build_optimizer(groups[k], params.optims[k]) for k in groups}
        monitored = params.monitor is not None
        self.schedulers = {
            k: build_scheduler(self.optimizers[k], s, monitored=monitored)
            for k, s in (params.schedulers or {}).items()
        }
        self.clip = {k: o.grad_clip_norm for k, o in params.optims.items()}
        self.updates = dict.fromkeys(self.optimizers, 0)
        self.state: dict[str, Any] = {}

    def check_name(self, name: str, call: str) -> None:
        if name not in self.optimizers:
            raise ValueError(
                f"{call}({name!r}): no such optimizer; the optimizers are "
                f"{', '.join(map(repr, self.optimizers))}"
            )

    def current_lrs(self) -> dict[str, float]:
        return {k: float(o.param_groups[0]["lr"]) for k, o in self.optimizers.items()}

    def plateau_step(self, value: float) -> None:
        for scheduler in self.schedulers.values():
            scheduler.step(value)

    # -- the component ---------------------------------------------------------------------
    def component_spec(self) -> ComponentSpec:
        return ComponentSpec("trainer", 1)

    def component_state(self) -> dict[str, Any]:
        return {
            "settings": self.params.identity(),
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "schedulers": {k: s.state_dict() for k, s in self.schedulers.items()},
            "updates": dict(self.updates),
            "state": self.state,
            "step": self._own("state_dict", None),
        }

    def _own(self, method: str, arg: Any) -> Any:
        """The inner step's own state (an objective's generator), when it has one."""
        fn = getattr(self.inner, method, None)
        if not callable(fn):
            return None
        return fn() if method == "state_dict" else fn(arg)

    def check_component_state(self, state: dict[str, Any], version: int) -> list[str]:
        saved, now = state.get("settings") or {}, self.params.identity()
        if saved == now:
            return []
        differ = sorted(
            f"{part}[{k!r}]"
            for part in ("optims", "schedulers")
            for k in set(saved.get(part, {})) | set(now[part])
            if saved.get(part, {}).get(k) != now[part].get(k)
        )
        return [
            f"NNTrainerParams {', '.join(differ)} differ from the checkpoint's; a stateful "
            "resume continues its optimizers and schedulers, which carry their own "
            "settings: keep the source run's, or resume_mode='weights_only' for fresh ones"
        ]

    def load_component_state(self, state: dict[str, Any], version: int = 1) -> None:
        for k, o in self.optimizers.items():
            load_optimizer_state(o, state["optimizers"][k])
        for k, s in self.schedulers.items():
            s.load_state_dict(state["schedulers"][k])
        self.updates = dict(state["updates"])
        self.state.clear()
        self.state.update(state["state"])
        if state.get("step") is not None:
            self._own("load_state_dict", state["step"])


class NamedUpdater(Updater):
    """``Updater`` for several optimizers of one backward pass: ``optimizer`` stays the
    engine's (never stepped: the loop's state and topology read it), each named one
    steps the parameters it owns with its own ``grad_clip_norm``; fp16's one scaler
    unscales each and updates once."""

    def __init__(self, engine: Updater, named: NamedOptimizers) -> None:
        super().__init__(engine.optimizer, engine.scaler, engine.precision, None)
        self.named = named
        self.owned = {
            k: [p for g in o.param_groups for p in g["params"]] for k, o in named.optimizers.items()
        }
        # every owned parameter once, in optimizer order: a data-parallel rank's flat
        # gradient all-reduce sends this layout on every rank
        self.params = [p for ps in self.owned.values() for p in ps]

    def zero_grad(self) -> None:
        for opt in self.named.optimizers.values():
            zero_grad(opt)

    def step(self, normalize: float | torch.Tensor | None = None, *, step_number: int = 0) -> None:
        scaler, optimizers = self.scaler, self.named.optimizers
        if scaler is not None:
            for opt in optimizers.values():
                scaler.unscale_(opt)
        if normalize is not None:
            grads = [p.grad for p in self.params if p.grad is not None]
            if grads:
                if isinstance(normalize, torch.Tensor):
                    torch._foreach_div_(grads, normalize.to(grads[0].dtype))
                else:
                    torch._foreach_div_(grads, float(normalize))
        for name, owned in self.owned.items():
            clip = self.named.clip.get(name)
            if self._check_finite:  # bf16: no optimizer steps on a non-finite gradient
                norm = clip_grad_norm(owned, clip or math.inf)
                if not bool(torch.isfinite(norm)):
                    raise FloatingPointError(
                        f"non-finite gradients of optimizer {name!r} at update {step_number} "
                        f"under {self.precision.effective}; no optimizer stepped. Lower its "
                        "max_lr, set its grad_clip_norm, or train in fp32"
                    )
            elif clip:
                clip_grad_norm(owned, clip)
        for opt in optimizers.values():
            if scaler is None:
                opt.step()
            else:
                scaler.step(opt)  # skipped when this optimizer's gradients are not finite
        if scaler is not None:
            scaler.update()
