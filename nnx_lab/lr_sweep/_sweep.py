"""The sweep itself: ``lr_finder`` (see the package) on the engine's training step,
everything restored in ``try/finally``."""

from __future__ import annotations

import copy
import functools
import math
import time
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from ..engine.data import first_batch
from ..engine.enums import Optims
from ..engine.events import SweepFinished, SweepPoints, SweepStarted, TrainingControl
from ..engine.fast_batches import batches
from ..engine.losses import LossFn
from ..engine.modes import preserved_modes
from ..engine.optim import build_optimizer, trainable_groups
from ..engine.params import NNOptimParams
from ..engine.precision import PrecisionPolicy, ResolvedPrecision, resolve_precision
from ..engine.sinks import EventBus
from ..engine.tasks import Task
from ..engine.train_step import TrainStep
from ..engine.training_state import preserved_rng
from ..engine.update import Updater
from ..errors import ConfigError, DataError
from ._result import LRFinderResult
from ._rules import RULES, SuggestionStopped, suggest

__all__ = ["check_sweep", "lr_finder"]

MODES = ("exp", "linear")


def _check(start_lr: Any, end_lr: Any, num_iter: Any, mode: str, rule: str) -> None:
    for name, value in (("start_lr", start_lr), ("end_lr", end_lr)):
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value <= 0
        ):
            raise ConfigError(f"lr_finder.{name}", value, "pass a learning rate > 0, e.g. 1e-7")
    if start_lr >= end_lr:
        raise ConfigError("lr_finder.start_lr", start_lr, f"it must be below end_lr={end_lr!r}")
    if isinstance(num_iter, bool) or not isinstance(num_iter, int) or num_iter < 2:
        raise ConfigError("lr_finder.num_iter", num_iter, "pass an integer >= 2, e.g. 100")
    if mode not in MODES:
        raise ConfigError("lr_finder.mode", mode, "use 'exp' or 'linear'")
    if rule not in RULES:
        raise ConfigError("lr_finder.rule", rule, f"use one of {', '.join(RULES)}")


check_sweep = _check  # the LR finder widget refuses the same arguments before its thread


def _optimizer(net: torch.nn.Module, optimizer: Any, start_lr: float) -> torch.optim.Optimizer:
    if optimizer is None:
        optimizer = NNOptimParams(name=Optims.ADAM)
    if isinstance(optimizer, NNOptimParams):
        return build_optimizer(trainable_groups(net), optimizer.replace(max_lr=start_lr))
    if isinstance(optimizer, torch.optim.Optimizer):
        return optimizer
    raise ConfigError(
        "lr_finder.optimizer",
        optimizer,
        "pass NNOptimParams(...) (Adam by default) or a torch.optim.Optimizer over the net",
    )


def _live_iterator(loader: Any) -> Any:
    """A persistent-worker DataLoader's live iterator (its workers), else None."""
    if not getattr(loader, "persistent_workers", False):
        return None
    return getattr(loader, "_iterator", None)


def _leaves_loader_workers_as_found(fn: Any) -> Any:
    """A persistent-worker loader keeps the iterator a pass made (its next epoch would
    differ from an unswept loader's): the sweep discards one it made, and refuses a live
    one (its position cannot be put back) before anything changes."""

    @functools.wraps(fn)
    def sweep(net: Any, train_loader: Any, *args: Any, **kwargs: Any) -> Any:
        if _live_iterator(train_loader) is not None:
            raise ConfigError(
                "lr_finder.train_loader",
                "a loader with a live persistent-worker iterator",
                "cannot use a train_loader with a live persistent-worker iterator; pass a "
                "fresh DataLoader (or one with persistent_workers=False)",
            )
        try:
            return fn(net, train_loader, *args, **kwargs)
        finally:
            made = _live_iterator(train_loader)
            if made is not None:
                train_loader._iterator = None
                getattr(made, "_shutdown_workers", lambda: None)()

    return sweep


def _own_generators(loader: Any) -> list[torch.Generator]:
    """Generators the engine's RngState does not capture: the sampler inside a batch
    sampler (``BatchSampler(RandomSampler(..., generator=g))``)."""
    inner = getattr(getattr(loader, "batch_sampler", None), "sampler", None)
    gen = getattr(inner, "generator", None)
    known = {
        id(getattr(loader, "generator", None)),
        id(getattr(getattr(loader, "sampler", None), "generator", None)),
        id(getattr(getattr(loader, "batch_sampler", None), "generator", None)),
    }
    return [gen] if isinstance(gen, torch.Generator) and id(gen) not in known else []


@_leaves_loader_workers_as_found
def lr_finder(
    net: torch.nn.Module,
    train_loader: Any,
    loss_fn: Any = None,
    start_lr: float = 1e-7,
    end_lr: float = 10.0,
    num_iter: int = 100,
    *,
    mode: str = "exp",
    optimizer: Any = None,
    precision: PrecisionPolicy | ResolvedPrecision | str | None = None,
    smoothing: float = 0.98,
    diverge_margin: float = 3.0,
    rule: str = "valley",
    callbacks: Sequence[Any] = (),
    control: TrainingControl | None = None,
    emit_every: int = 5,
) -> LRFinderResult:
    """Sweep learning rates on ``net`` with batches of ``train_loader``; see the module.

    ``loss_fn`` is a ``Losses`` member or a callable ``loss(out, y)`` (default:
    cross-entropy). ``optimizer``: ``NNOptimParams`` (its kind and settings; the learning
    rate is the sweep's) or an optimizer over ``net``'s parameters, whose state is
    restored afterwards. ``precision``: a policy resolved on the net's device, as a run's
    is. The sweep ends early when the smoothed loss exceeds the best smoothed loss by
    ``diverge_margin`` times the loss's scale (``max(|best|, |first|)``, so negative
    losses work), or when a loss is not finite (dropped from the suggestion).
    ``callbacks`` receive the sweep's events (``on_sweep_started``,
    ``on_sweep_points``, ``on_sweep_finished``); ``control.request_stop()`` ends the
    sweep after the current step, restored like any other.
    """
    _check(start_lr, end_lr, num_iter, mode, rule)
    if not 0 <= smoothing < 1:
        raise ConfigError("lr_finder.smoothing", smoothing, "pass a factor in [0, 1), e.g. 0.98")
    if not diverge_margin > 0:
        raise ConfigError("lr_finder.diverge_margin", diverge_margin, "pass a number > 0")
    if not isinstance(net, torch.nn.Module):
        raise ConfigError("lr_finder.net", type(net).__name__, "pass the torch module (model.net)")
    params = list(net.parameters())
    if not params:
        raise ConfigError("lr_finder.net", type(net).__name__, "the network has no parameters")
    device = params[0].device
    loss = LossFn(loss_fn if loss_fn is not None else _default_loss())
    saved_gens = [(g, g.get_state()) for g in _own_generators(train_loader)]
    batch = first_batch(train_loader, "lr_finder.train_loader")  # refuses an empty loader
    for gen, state in saved_gens:
        gen.set_state(state)
    if not isinstance(batch, tuple | list) or len(batch) != 2:
        raise DataError(
            "lr_finder.train_loader", "does not yield (X, y) pairs", "yield (features, targets)"
        )
    resolved = _precision(precision, device)
    bus = EventBus(callbacks)
    control = control or TrainingControl()
    lrs = _schedule(start_lr, end_lr, num_iter, mode)

    opt_given = isinstance(optimizer, torch.optim.Optimizer)
    # Non-tensor entries (a module's extra state) are copied as they are.
    saved_weights = {
        k: v.detach().clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v)
        for k, v in net.state_dict().items()
    }
    saved_grads = [None if p.grad is None else p.grad.detach().clone() for p in params]
    saved_opt = optimizer.state_dict() if opt_given else None
    t0 = time.perf_counter()
    result: LRFinderResult | None = None
    status, error = "finished", None
    with preserved_rng([train_loader]), preserved_modes(net):
        try:
            opt = _optimizer(net, optimizer, start_lr)
            updater = Updater(opt, _scaler(resolved, device), resolved, clip_norm=None)
            step = TrainStep(net, loss, Task("regression", 1), device, resolved, updater)
            bus.attach(control)
            bus.emit(SweepStarted(num_iter, float(start_lr), float(end_lr), mode))
            result = _sweep(
                step,
                train_loader,
                lrs,
                opt,
                smoothing,
                diverge_margin,
                rule,
                bus,
                control,
                emit_every,
                device,
                mode,
            )
            if result.status == "stopped":
                status = "stopped"
        except BaseException as exc:
            status, error = "failed", f"{type(exc).__name__}: {exc}"
            raise
        finally:
            net.load_state_dict(saved_weights)
            if opt_given and saved_opt is not None:
                optimizer.load_state_dict(saved_opt)
            for p, grad in zip(params, saved_grads, strict=True):
                p.grad = grad  # a gradient the caller had comes back; None stays None
            for gen, state in saved_gens:
                gen.set_state(state)
            try:
                bus.emit(
                    SweepFinished(
                        status=status,
                        suggested_lr=None if result is None else result.suggested_lr,
                        # the rule that made the pick (another when the asked one found none)
                        rule=rule if result is None else result.rule,
                        suggestions={} if result is None else dict(result.suggestions),
                        stopped_early=False if result is None else result.stopped_early,
                        reason=None if result is None else result.reason,
                        error=error,
                    )
                )
            finally:
                bus.detach()
    assert result is not None
    result.seconds = time.perf_counter() - t0
    return result


def _default_loss() -> Any:
    from ..engine.enums import Losses

    return Losses.CROSS_ENTROPY


def _precision(policy: Any, device: torch.device) -> ResolvedPrecision:
    if isinstance(policy, ResolvedPrecision):
        return policy
    if isinstance(policy, str):
        policy = PrecisionPolicy(policy)
    if policy is not None and not isinstance(policy, PrecisionPolicy):
        raise ConfigError("lr_finder.precision", policy, "pass PrecisionPolicy(...) or None")
    return resolve_precision(
        None if policy is None or policy.mode == "fp32" else policy, False, device.type
    )


def _scaler(precision: ResolvedPrecision, device: torch.device) -> Any:
    return torch.amp.GradScaler(device.type) if precision.uses_scaler else None


def _schedule(start: float, end: float, n: int, mode: str) -> list[float]:
    if mode == "exp":
        return [float(start * (end / start) ** (i / (n - 1))) for i in range(n)]
    return [float(start + (end - start) * i / (n - 1)) for i in range(n)]


def _sweep(
    step: TrainStep,
    loader: Any,
    lrs: list[float],
    opt: torch.optim.Optimizer,
    beta: float,
    margin: float,
    rule: str,
    bus: EventBus,
    control: TrainingControl,
    emit_every: int,
    device: torch.device,
    mode: str,
) -> LRFinderResult:
    losses: list[float] = []
    smoothed: list[float] = []
    avg, best, first = 0.0, math.inf, None
    stopped_early, reason, cycled, status = False, None, False, "finished"
    pending: list[tuple[int, float, float, float]] = []
    step.net.train()
    batches = _batches(loader)
    for i, lr in enumerate(lrs):
        if control.stop_requested:
            stopped_early, reason, status = True, control.stop_reason or "stopped", "stopped"
            break
        for group in opt.param_groups:
            group["lr"] = lr
        X, y, wrapped = next(batches)
        cycled = cycled or wrapped
        out = step(X.to(device, non_blocking=True), y.to(device, non_blocking=True), i + 1)
        value = float(out.loss)  # the sweep decides on every step: one read per step
        losses.append(value)
        if not math.isfinite(value):
            smoothed.append(math.nan)
            pending.append((i, lr, value, math.nan))
            stopped_early, reason = True, f"the loss was not finite at step {i + 1} (lr {lr:.3g})"
            break
        avg = beta * avg + (1 - beta) * value
        smooth = avg / (1 - beta ** (i + 1))
        smoothed.append(smooth)
        pending.append((i, lr, value, smooth))
        first = smooth if first is None else first
        best = min(best, smooth)
        scale = max(abs(best), abs(first), 1e-12)
        if len(pending) >= emit_every:
            bus.emit(SweepPoints(tuple(pending)))
            pending = []
        if smooth > best + margin * scale and i > 0:
            stopped_early = True
            reason = f"the smoothed loss diverged at step {i + 1} (lr {lr:.3g})"
            break
    if pending:
        bus.emit(SweepPoints(tuple(pending)))
    used = lrs[: len(losses)]
    finite = [(lr, s) for lr, s in zip(used, smoothed, strict=True) if math.isfinite(s)]
    # A Stop that comes after the last step ends the reading of the curve too (a stop
    # during the steps has already ended them: their curve is read in full).
    watch = None if status == "stopped" else (lambda: control.stop_requested)
    try:
        suggestions = suggest([p[0] for p in finite], [p[1] for p in finite], stop=watch)
    except SuggestionStopped as exc:
        suggestions, status = exc.args[0], "stopped"
        stopped = (
            f"{control.stop_reason or 'stopped'} while the curve was read: "
            "the valley rule was not computed"
        )
        reason = stopped if reason is None else f"{reason}; {stopped}"  # keep a divergence
    picked = suggestions.get(rule)
    if picked is None:  # the default rule found nothing on a short curve: say which did
        rule = next((r for r in RULES if suggestions.get(r) is not None), rule)
        picked = suggestions.get(rule)
    return LRFinderResult(
        lrs=used,
        losses=losses,
        smoothed=smoothed,
        suggested_lr=picked,
        rule=rule,
        suggestions=suggestions,
        stopped_early=stopped_early,
        reason=reason,
        num_iter=len(lrs),
        cycled=cycled,
        mode=mode,
        status=status,
    )


def _batches(loader: Any) -> Iterator[tuple[torch.Tensor, torch.Tensor, bool]]:
    """Batches forever: the loader is started over when it runs out (and says so)."""
    wrapped = False
    while True:
        got = False
        for X, y in batches(loader):
            got = True
            yield X, y, wrapped
        if not got:
            raise DataError("lr_finder.train_loader", "yields no batch", "pass a loader with data")
        wrapped = True
