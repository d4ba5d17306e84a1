"""``HealthProbe``: gradient health per parameter tensor, every ``every`` updates.

A sink on the event stream. At a sampled step it reads what the update left behind:
each tensor's gradient (as the optimizer applied it: unscaled, normalized, clipped),
its weight and the update (the weights against a copy taken just before that step).
Three ``torch._foreach_norm`` calls and one ``stack`` build the step's row on the
device; the rows stay there until the loop's next bulk read-back of its step records
(``StepMetrics``), when they cross to the host together: no sync of their own.

Activations the network holds as modules (``nn.ReLU``, ``nn.ReLU6``, ``nn.GELU``) get
forward hooks for the sampled step only, measuring the fraction of units no row of the
batch switched on ("dead"). Activations called as functions (``F.relu``, ``torch.relu``,
``x.relu()``, ``F.relu6``, ``F.gelu``) are caught on that step only, by a
``TorchFunctionMode`` entered by the network's own forward pre-hook and left by its
forward hook, and attributed to the module whose forward called them
(``block.relu()``: its first relu call, ``block.relu()#1`` its second); on
unsampled steps no hook and no mode exist. The probe changes no number of the run:
with it or without it, the weights are bitwise the same (it only reads, and copies the weights).

Under ``distributed=`` only rank 0 is bound: its gradients are the synchronized ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

from ...errors import ConfigError
from ..events import HealthRecord, RunEnding, RunStarted, StepEnded, StepMetrics

__all__ = ["HealthProbe", "bind_probes", "first_problems"]

# the input below which a unit is off (its gradient is zero, or nearly: GELU(-3) ~ 0.004)
_OFF_BELOW: dict[type, float] = {nn.ReLU: 0.0, nn.ReLU6: 0.0, nn.GELU: -3.0}
# the same activations called as functions: (the name they are shown by, threshold)
_FUNCTIONS: dict[Any, tuple[str, float]] = {
    F.relu: ("relu", 0.0),
    torch.relu: ("relu", 0.0),
    torch.relu_: ("relu", 0.0),
    torch.Tensor.relu: ("relu", 0.0),
    torch.Tensor.relu_: ("relu", 0.0),
    F.relu6: ("relu6", 0.0),
    F.gelu: ("gelu", -3.0),
}


def _alive(x: torch.Tensor, below: float) -> torch.Tensor:
    """Per unit, whether any row switched it on: channels of an image batch (N, C, H,
    W), else the last axis."""
    on = x.detach() > below
    if x.ndim == 4:
        return on.any(dim=(0, 2, 3))
    return on.reshape(-1, x.shape[-1]).any(dim=0)


class _FunctionalActs(TorchFunctionMode):
    """Active during one probed forward: each activation function's input, measured
    and attributed to the innermost module in forward (kept by module hooks)."""

    def __init__(self, probe: HealthProbe) -> None:
        super().__init__()
        self.probe = probe
        self.stack: list[tuple[str, nn.Module]] = []
        self.calls: dict[str, int] = {}

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        out = func(*args, **(kwargs or {}))
        known = _FUNCTIONS.get(func)
        if known is not None and self.stack and args:
            name, mod = self.stack[-1]
            x = args[0]
            # an nn.ReLU module's own F.relu is measured by its module hook already
            if type(mod) not in _OFF_BELOW and isinstance(x, torch.Tensor) and x.ndim >= 2:
                base = f"{name or '<net>'}.{known[0]}()"
                n = self.calls.get(base, 0)
                self.calls[base] = n + 1
                key = base + (f"#{n}" if n else "")
                with torch.no_grad():
                    # an in-place relu_ has already overwritten x: its output is the input
                    # clipped at 0, which tells the same units apart for a threshold of 0
                    self.probe._merge(key, _alive(x, known[1]))
        return out


class HealthProbe:
    """Gradient health every ``every`` optimizer updates (and at the first one).

    ``vanish`` and ``explode`` are the gradient norms below / above which a tensor's
    gradient is reported as vanishing / exploding; a NaN or an infinity in a gradient or
    a weight is reported as non-finite. ``dead_units`` hooks the activation modules.
    Pass it in ``callbacks=`` (or use ``TrainingMonitor(health=True)``); ``records``
    holds what it measured, ``problems`` the first problem of each kind.
    """

    def __init__(
        self,
        every: int = 50,
        *,
        vanish: float = 1e-7,
        explode: float = 1e3,
        dead_units: bool = True,
        keep: int = 10_000,
    ) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ConfigError("HealthProbe.every", every, "pass a whole number of updates >= 1")
        for name, value in (("vanish", vanish), ("explode", explode)):
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"HealthProbe.{name}", value, "pass a finite number > 0")
        if vanish >= explode:
            raise ConfigError(
                "HealthProbe.vanish", vanish, f"pass a threshold below explode={explode!r}"
            )
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ConfigError("HealthProbe.keep", keep, "pass a whole number of records >= 1")
        self.every, self.vanish, self.explode = every, float(vanish), float(explode)
        self.dead_units, self.keep = bool(dead_units), keep
        self._emit: Callable[[Any], None] | None = None
        self._tensors: list[tuple[str, str, str | None, torch.Tensor]] = []
        self._acts: list[tuple[str, nn.Module]] = []
        self._net: nn.Module | None = None
        self.reset()

    def reset(self) -> None:
        """Forget the last run (``train`` calls it before each run)."""
        self.records: list[HealthRecord] = []
        self.problems: dict[str, dict[str, Any]] = {}
        self._pending: list[tuple[int, int, torch.Tensor, list[bool], list[str]]] = []
        self._snapshot: list[torch.Tensor] | None = None
        self._armed: int | None = None
        self._alive: dict[str, torch.Tensor] = {}
        self._handles: list[Any] = []
        self._epoch = 0
        self._last = 0  # the update count at the last step's end

    # -- binding -------------------------------------------------------------------------
    def bind(
        self,
        net: nn.Module,
        optimizers: dict[str | None, Sequence[torch.Tensor]],
        emit: Callable[[Any], None],
    ) -> None:
        """Watch ``net``'s trainable tensors (in its order), each tagged with the name of
        the optimizer that owns it (``None``: the one optimizer), and emit through
        ``emit`` (the loop's bus)."""
        self._unhook()
        self.reset()
        owner = {id(p): name for name, ps in optimizers.items() for p in ps}
        self._tensors = [
            (name, name.rpartition(".")[0] or name, owner.get(id(p)), p)
            for name, p in _named(net)
            if p.requires_grad
        ]
        self._acts = [
            (name, m) for name, m in _modules(net) if self.dead_units and type(m) in _OFF_BELOW
        ]
        self._net = net
        self._emit = emit

    # -- the sink ------------------------------------------------------------------------
    def on_run_started(self, event: RunStarted) -> None:
        self._last = event.start_step
        if self._emit is not None:
            self._arm(event.start_step + 1)

    def on_epoch_started(self, event: Any) -> None:
        self._epoch = int(event.epoch)

    def on_step_ended(self, event: StepEnded) -> None:
        if self._emit is None:
            return
        # a loop step may hold several updates (the Trainer's G and D): it is sampled
        # when it reaches the armed update, and the next one is armed when the next
        # step, as long as this one, reaches a multiple of ``every``
        stride = max(1, event.step - self._last)
        self._last = event.step
        if self._armed is not None and event.step >= self._armed:
            self._sample(event.step, event.epoch)
        nxt = (event.step // self.every + 1) * self.every
        if event.step + stride >= nxt:
            self._arm(nxt)

    def on_step_metrics(self, event: StepMetrics) -> None:
        self._read_back()

    def on_run_ending(self, event: RunEnding) -> None:
        if self._emit is None:
            return
        self._unhook()
        if event.status == "failed" and self._tensors:
            # the failed step's gradients (its update was not applied): where a NaN began
            self._snapshot = None
            self._sample(event.step + 1, self._epoch)
        self._read_back()
        self._armed = self._snapshot = None

    def on_detach(self) -> None:
        self._unhook()
        self._snapshot = None
        self._armed = None

    # -- measuring -----------------------------------------------------------------------
    def _arm(self, step: int) -> None:
        """Before ``step``: copy the weights (the update's base) and hook the activations."""
        self._armed = step
        params = [t[3] for t in self._tensors]
        with torch.no_grad():
            self._snapshot = torch._foreach_mul(params, 1.0) if params else []
        if self.dead_units and self._net is not None and not self._handles:
            self._alive = {}
            self._handles = [m.register_forward_hook(self._hook(n, m)) for n, m in self._acts]
            self._handles += self._functional_hooks(self._net)

    def _functional_hooks(self, net: nn.Module) -> list[Any]:
        """Hooks for one probed forward: the root's pre-hook enters the mode (in
        training, with gradients: the update's forward, not an evaluation), every
        module's pre/post hooks keep the stack of modules in forward, the root's
        forward hook leaves the mode."""
        state: dict[str, Any] = {"mode": None}

        def enter(mod: nn.Module, inputs: Any) -> None:
            if state["mode"] is None and mod.training and torch.is_grad_enabled():
                state["mode"] = _FunctionalActs(self)
                state["mode"].__enter__()

        def leave(mod: nn.Module, inputs: Any, output: Any) -> None:
            mode, state["mode"] = state["mode"], None
            if mode is not None:
                mode.__exit__(None, None, None)

        def push(name: str) -> Callable[..., None]:
            def pre(mod: nn.Module, inputs: Any) -> None:
                mode = state["mode"]
                if mode is not None:
                    mode.stack.append((name, mod))
                    if name not in (n for n, _ in mode.stack[:-1]):  # a new forward of it
                        prefix = f"{name or '<net>'}."
                        for base in [b for b in mode.calls if b.startswith(prefix)]:
                            if "." not in base[len(prefix) : -2]:
                                del mode.calls[base]

            return pre

        def pop(mod: nn.Module, inputs: Any, output: Any) -> None:
            mode = state["mode"]
            if mode is not None and mode.stack:
                mode.stack.pop()

        handles = [net.register_forward_pre_hook(enter)]
        for name, m in [("", net), *_modules(net)]:
            handles.append(m.register_forward_pre_hook(push(name)))
            handles.append(m.register_forward_hook(pop))
        handles.append(net.register_forward_hook(leave))
        return handles

    def _merge(self, name: str, alive: torch.Tensor) -> None:
        seen = self._alive.get(name)
        if seen is None or seen.shape != alive.shape:
            self._alive[name] = alive
        else:  # accumulation: a unit any micro-batch switched on is alive
            self._alive[name] = seen | alive

    def _hook(self, name: str, module: nn.Module) -> Callable[..., None]:
        below = _OFF_BELOW[type(module)]

        def hook(mod: nn.Module, inputs: tuple[Any, ...], output: Any) -> None:
            if not mod.training or not torch.is_grad_enabled() or not inputs:
                return
            x = inputs[0]
            if not isinstance(x, torch.Tensor) or x.ndim < 2:
                return
            with torch.no_grad():
                self._merge(name, _alive(x, below))

        return hook

    def _unhook(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _sample(self, step: int, epoch: int) -> None:
        params = [t[3] for t in self._tensors]
        if not params:
            return
        has_grad = [p.grad is not None for p in params]
        with torch.no_grad():
            grads = [p.grad for p in params if p.grad is not None]
            parts = list(torch._foreach_norm(grads)) if grads else []
            parts += torch._foreach_norm(params)
            snap = self._snapshot
            if snap is not None:
                parts += torch._foreach_norm(snap)
                # the update, in place in the copy (no second full-size buffer):
                # ‖w_before − w_after‖ is the update's norm
                torch._foreach_sub_(snap, params)
                parts += torch._foreach_norm(snap)
            dead = sorted(self._alive)
            parts += [1.0 - self._alive[n].float().mean() for n in dead]
            row = torch.stack([p.float() for p in parts])
        self._pending.append((step, epoch, row, has_grad, dead))
        self._snapshot, self._alive, self._armed = None, {}, None
        self._unhook()

    def _read_back(self) -> None:
        if not self._pending or self._emit is None:
            return
        pending, self._pending = self._pending, []
        host = torch.cat([p[2] for p in pending]).tolist()  # one copy, after the loop's sync
        at = 0
        names = [t[0] for t in self._tensors]
        modules = [t[1] for t in self._tensors]
        owners = [t[2] for t in self._tensors]
        for step, epoch, row, has_grad, dead in pending:
            values = host[at : at + row.numel()]
            at += row.numel()
            record = self._record(step, epoch, values, has_grad, dead, names, modules)
            if any(o is not None for o in owners):
                record = _with(record, optimizers=owners)
            self._keep(record)
            self._emit(record)

    def _record(
        self,
        step: int,
        epoch: int,
        values: list[float],
        has_grad: list[bool],
        dead: list[str],
        names: list[str],
        modules: list[str],
    ) -> HealthRecord:
        n, k = len(names), sum(has_grad)
        it = iter(values[:k])
        grad: list[float | None] = [next(it) if h else None for h in has_grad]
        weight = values[k : k + n]
        rest = values[k + n :]
        ratio: list[float | None] = [None] * n
        if len(rest) >= 2 * n:
            base, delta, rest = rest[:n], rest[n : 2 * n], rest[2 * n :]
            ratio = [_ratio(d, b) for d, b in zip(delta, base, strict=True)]
        record = HealthRecord(
            step=step,
            epoch=epoch,
            names=list(names),
            modules=list(modules),
            grad_norm=grad,
            weight_norm=list(weight),
            update_ratio=ratio,
            dead=dict(zip(dead, rest, strict=True)) if dead else None,
        )
        found = first_problems(record, self.vanish, self.explode, known=self.problems)
        if found:
            for alert in found:
                self.problems[alert["kind"]] = alert
            record = _with(record, alerts=found)
        return record

    def _keep(self, record: HealthRecord) -> None:
        self.records.append(record)
        if len(self.records) > self.keep:
            del self.records[: len(self.records) - self.keep]


def first_problems(
    record: HealthRecord,
    vanish: float,
    explode: float,
    known: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The problems of ``record`` not in ``known`` (one per kind): for each kind, the
    first tensor in the network's order whose gradient (or weight) is non-finite, whose
    gradient norm is below ``vanish`` or above ``explode``."""
    known = known or {}
    found: list[dict[str, Any]] = []
    for kind in ("nonfinite", "vanishing", "exploding"):
        if kind in known:
            continue
        hits = [
            (name, g)
            for name, g, w in zip(record.names, record.grad_norm, record.weight_norm, strict=True)
            if _is(kind, g, w, vanish, explode)
        ]
        if hits:
            name, value = hits[0]
            found.append(
                {
                    "kind": kind,
                    "layer": name,
                    "step": record.step,
                    "value": value if value is None or math.isfinite(value) else None,
                    "layers": len(hits),
                }
            )
    return found


def _is(kind: str, g: float | None, w: float | None, vanish: float, explode: float) -> bool:
    if kind == "nonfinite":
        return (g is not None and not math.isfinite(g)) or (w is not None and not math.isfinite(w))
    if g is None or not math.isfinite(g):
        return False
    return g < vanish if kind == "vanishing" else g > explode


def _ratio(delta: float, base: float) -> float | None:
    if not (math.isfinite(delta) and math.isfinite(base)):
        return math.nan
    if base == 0.0:
        return None if delta == 0.0 else math.inf
    return delta / base


def _with(record: HealthRecord, **changes: Any) -> HealthRecord:
    return replace(record, **changes)


def _unwrapped(name: str) -> str:
    # a DDP wrapper's "module." and torch.compile's "_orig_mod." say nothing of the layer
    for prefix in ("module.", "_orig_mod."):
        while name.startswith(prefix):
            name = name[len(prefix) :]
    return name


def _named(net: nn.Module) -> list[tuple[str, torch.Tensor]]:
    return [(_unwrapped(n), p) for n, p in net.named_parameters()]


def _modules(net: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(_unwrapped(n), m) for n, m in net.named_modules() if n]


def bind_probes(
    callbacks: Sequence[Any],
    net: nn.Module,
    optimizers: dict[str | None, Sequence[torch.Tensor]],
    bus: Any,
) -> list[HealthProbe]:
    """Bind each ``HealthProbe`` of ``callbacks`` (passed itself, or carried by a
    callback as ``health_probe``, which then joins the bus) to the run's network."""
    bound: list[HealthProbe] = []
    for cb in callbacks:
        probe = cb if isinstance(cb, HealthProbe) else getattr(cb, "health_probe", None)
        if not isinstance(probe, HealthProbe) or probe in bound:
            continue
        probe.bind(net, optimizers, bus.emit)
        if probe is not cb:
            bus.add(probe)
        bound.append(probe)
    return bound
