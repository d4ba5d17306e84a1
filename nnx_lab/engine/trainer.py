"""The multi-optimizer Trainer (§3.2): GANs' G and D, actor-critic's policy and value.

``Trainer(model).train(params=NNTrainerParams(...), trainer_step_fn=...)`` trains
``model`` through ``NNModel.train``: the run, its id, the checkpoints, warm resume, the
event stream and the monitor are that path's. The Trainer adds one thing, a step that
owns several named optimizers (``_NamedStep``). It is the run's ``train_step_fn`` and
a component, so every optimizer's and scheduler's state travels with each checkpoint;
its ``run_identity`` puts every optimizer's settings into the run id, and each step
record carries ``lrs``: every optimizer's current rate by name.

Ownership: each optimizer owns the trainable parameters its ``param_groups`` select;
a parameter selected by two optimizers, and a trainable one that none selects, are
refused before any run (freeze a parameter no optimizer should train). A frozen
parameter belongs to no optimizer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ConfigError
from .components import ComponentSpec
from .custom_step import TrainStepContext
from .edp import EDP
from .fingerprint import callable_identity
from .objective import Objective
from .optim import build_optimizer, build_scheduler
from .param_groups import DEFAULT_RULE, parameter_rules
from .trainer_objective import ObjectiveTrainerStep
from .trainer_params import NNTrainerParams

__all__ = ["Trainer", "TrainerStepContext", "owned_groups"]


@dataclass(frozen=True)
class TrainerStepContext:
    """What a ``trainer_step_fn`` is given for one loader batch. It updates with
    ``optimizers[name]`` (or ``update(name, loss)``) and calls ``report_update(name)``
    after each optimizer step it takes: the run's step count advances by those."""

    model: torch.nn.Module
    batch: Any
    optimizers: dict[str, torch.optim.Optimizer]
    schedulers: dict[str, Any]  # the plateau schedulers by name (stepped by the run)
    report_update: Callable[[str], None]
    update: Callable[[str, torch.Tensor], None]
    batch_idx: int
    epoch_idx: int
    is_last_batch: bool | None
    state: dict[str, Any]  # the step's own scratch space, kept for the run
    device: torch.device | None
    loss_fn: Any = None
    precision: Any = None  # the run's ResolvedPrecision (fp32: see full_precision_only)
    updates: dict[str, int] | None = None  # each optimizer's updates so far (a copy)
    grad_clip_norms: dict[str, float | None] | None = None
    scaler: Any = None  # an fp16 policy's GradScaler (the objective path only)


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


class _NamedStep:
    """The run's ``train_step_fn``: the named optimizers and schedulers around the
    user's step, and their state as the run's component."""

    # A step function owns every update, so it would own autocast and a scaler per
    # optimizer too: refused under a reduced policy. An objective's updates are the
    # Trainer's own, and run in the policy.
    __nnx_full_precision_only__ = True

    def __init__(self, net: torch.nn.Module, params: NNTrainerParams, fn: Callable) -> None:
        self.fn, self.params = fn, params
        if isinstance(fn, ObjectiveTrainerStep):
            self.__nnx_full_precision_only__ = False
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

    def __repr__(self) -> str:  # how a refusal names this step
        return f"Trainer(optims {', '.join(self.optimizers)})"

    # -- the step -------------------------------------------------------------------------
    def __call__(self, ctx: TrainStepContext) -> EDP:
        def report_update(name: str) -> None:
            if name not in self.optimizers:
                raise ValueError(
                    f"report_update({name!r}): no such optimizer; the optimizers are "
                    f"{', '.join(map(repr, self.optimizers))}"
                )
            self.updates[name] += 1
            ctx.report_update()

        def update(name: str, loss: torch.Tensor) -> None:
            opt = self.optimizers[name]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if self.clip[name]:
                owned = [p for g in opt.param_groups for p in g["params"]]
                torch.nn.utils.clip_grad_norm_(owned, self.clip[name])
            opt.step()
            report_update(name)

        return self.fn(
            TrainerStepContext(
                model=ctx.model,
                batch=ctx.batch,
                optimizers=self.optimizers,
                schedulers=self.schedulers,
                report_update=report_update,
                update=update,
                batch_idx=ctx.batch_idx,
                epoch_idx=ctx.epoch_idx,
                is_last_batch=ctx.is_last_batch,
                state=self.state,
                device=ctx.device,
                loss_fn=ctx.loss_fn,
                precision=ctx.precision,
                updates=dict(self.updates),
                grad_clip_norms=dict(self.clip),
                scaler=ctx.scaler,
            )
        )

    # -- what the engine asks of it --------------------------------------------------------
    def run_identity(self) -> dict[str, Any]:
        target = getattr(self.fn, "identity_target", None)  # an objective's own code
        step = callable_identity(self.fn if target is None else target())
        return {"step": step, **self.params.identity()}

    def current_lrs(self) -> dict[str, float]:
        return {k: float(o.param_groups[0]["lr"]) for k, o in self.optimizers.items()}

    def current_terms(self) -> Any:
        terms = getattr(self.fn, "current_terms", None)
        return None if terms is None else terms()

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
        """The step's own state (an objective's generator), when it has one."""
        fn = getattr(self.fn, method, None)
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
            o.load_state_dict(state["optimizers"][k])
        for k, s in self.schedulers.items():
            s.load_state_dict(state["schedulers"][k])
        self.updates = dict(state["updates"])
        self.state.clear()
        self.state.update(state["state"])
        if state.get("step") is not None:
            self._own("load_state_dict", state["step"])


class Trainer:
    """Trains one ``NNModel`` with several named optimizers (§3.2)."""

    def __init__(self, model: Any) -> None:
        from .model import NNModel  # the model module is heavy; the Trainer wraps one

        if not isinstance(model, NNModel):
            raise ConfigError("Trainer(model)", type(model).__name__, "pass an NNModel(...)")
        self.model = model
        self.last_step: _NamedStep | None = None

    def train(
        self,
        params: NNTrainerParams,
        *,
        trainer_step_fn: Callable[[TrainerStepContext], EDP] | None = None,
        objective: Any = None,
        callbacks: Sequence[Any] = (),
        components: Sequence[Any] = (),
        **train_kw: Any,
    ) -> Any:
        """Train and record a run (``NNModel.train``'s, whose keywords ``control``,
        ``provenance``, ``eval_step_fn`` and ``salt`` pass through); every check runs
        before the run directory exists. Returns the ``NNRun``."""
        if not isinstance(params, NNTrainerParams):
            raise ConfigError("params", type(params).__name__, "pass an NNTrainerParams(...)")
        if (trainer_step_fn is None) == (objective is None):
            raise ConfigError(
                "trainer_step_fn",
                trainer_step_fn,
                "pass exactly one of trainer_step_fn= (a function (ctx: TrainerStepContext) "
                "-> EDP that steps the optimizers) and objective= (an Objective), not both",
            )
        if objective is not None:
            if not isinstance(objective, Objective):
                raise ConfigError("objective", objective, "pass an nnx_lab.Objective(...)")
            if objective.nonfinite != "fail":
                raise ConfigError(
                    "Objective.nonfinite",
                    objective.nonfinite,
                    'the Trainer stops on a non-finite loss: use nonfinite="fail" (a '
                    "skipped update is NNModel.train's objective path only)",
                )
            trainer_step_fn = ObjectiveTrainerStep(objective)
        elif not callable(trainer_step_fn):
            raise ConfigError(
                "trainer_step_fn",
                trainer_step_fn,
                "pass a function (ctx: TrainerStepContext) -> EDP that steps the optimizers",
            )
        for refused in ("train_step_fn", "distributed"):
            if refused in train_kw:
                raise ConfigError(
                    refused,
                    train_kw[refused],
                    "the Trainer's step is trainer_step_fn= or objective=; it trains on one "
                    "process (use NNModel.train for a data-parallel run)",
                )
        step = _NamedStep(self.model.net, params, trainer_step_fn)
        self.last_step = step
        return self.model.train(
            params.train_params(),
            callbacks,
            components,
            train_step_fn=step,
            **train_kw,
        )
