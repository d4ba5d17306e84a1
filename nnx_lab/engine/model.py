"""``NNModel``: build, train, evaluate and predict with the NNx API."""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .checkpoint import NNCheckpoint
from .data import check_loader, data_identity, iter_inputs, tensor_digest
from .enums import Devices, RunStatus
from .errors import ConfigError
from .events import TrainingControl
from .loop import TrainingLoop, build_optimizer, build_scheduler, seed_everything
from .metrics import EDP, ConfusionAccumulator, decode
from .nets import build_net
from .params import NNModelParams, NNParams, NNTrainParams
from .precision import PrecisionPolicy, ResolvedPrecision, resolve_precision
from .resume import plan_resume
from .runs import (
    FORMAT_VERSION,
    NNRun,
    environment_metadata,
    existing_run_message,
    reserve_run_dir,
    resolve_runs_root,
    run_id_for,
    write_metadata,
)

__all__ = ["NNModel", "Prediction"]


@dataclass(frozen=True)
class Prediction:
    """``predict()``'s result: raw float32 logits and decoded classes (or values)."""

    logits: torch.Tensor
    classes: torch.Tensor

    def __len__(self) -> int:
        return int(self.logits.shape[0])


def _device(kind: Devices) -> torch.device:
    if kind is Devices.CUDA and not torch.cuda.is_available():
        raise ConfigError(
            "NNModelParams.device",
            kind,
            "no CUDA device is present; use Devices.get() or Devices.CPU",
        )
    if kind is Devices.MPS and not torch.backends.mps.is_available():
        raise ConfigError(
            "NNModelParams.device",
            kind,
            "no MPS device is present; use Devices.get() or Devices.CPU",
        )
    return torch.device(kind.value)


class NNModel:
    """A network plus its loss, device and precision; ``model.net`` is the torch module.

    The network is built under ``init_seed`` in a forked RNG, so the same parameters give
    the same initial weights and the caller's random streams are left alone.
    """

    def __init__(
        self,
        net_params: NNParams | None = None,
        params: NNModelParams | None = None,
        *,
        init_seed: int = 0,
    ) -> None:
        if params is None:
            params = NNModelParams()
        if not isinstance(params, NNModelParams):
            raise ConfigError("params", params, "pass an NNModelParams(...)")
        if not isinstance(net_params, NNParams):
            raise ConfigError(
                "net_params",
                net_params,
                "pass NNParams(input_dim=..., output_dim=..., hidden_dims=[...])",
            )
        self.net_params = net_params
        self.params = params
        self.device = _device(params.device)
        self.precision: ResolvedPrecision = resolve_precision(
            params.precision, params.mixed_precision, self.device.type
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(init_seed)
            self.net = build_net(params.net, net_params).to(self.device)
        from .metrics import loss_function

        self.loss_fn = loss_function(params.loss)
        self.last_run: NNRun | None = None

    def __repr__(self) -> str:
        return (
            f"NNModel(net={self.params.net.name}, dims={self.net_params.input_dim}->"
            f"{list(self.net_params.hidden_dims)}->{self.net_params.output_dim}, "
            f"loss={self.params.loss.name}, device={self.device}, "
            f"precision={self.precision.effective})"
        )

    # -- training ---------------------------------------------------------------------------
    def train(
        self,
        params: NNTrainParams,
        callbacks: Sequence[Any] = (),
        components: Sequence[Any] = (),
        control: TrainingControl | None = None,
    ) -> NNRun:
        """Train and record a run; every check runs before the run directory exists.

        ``callbacks`` are event sinks; ``components`` are extra objects whose
        ``state_dict()`` travels with checkpoints; ``control`` lets another thread stop
        the run between steps (a fresh one is made when omitted).
        """
        if not isinstance(params, NNTrainParams):
            raise ConfigError("params", params, "pass an NNTrainParams(...)")
        from .sinks import EventBus

        EventBus(callbacks)  # refuses a non-sink now, before anything exists
        for comp in components:
            if not (
                callable(getattr(comp, "state_dict", None))
                and callable(getattr(comp, "load_state_dict", None))
            ):
                raise ConfigError(
                    "components",
                    comp,
                    "each component must define state_dict() and load_state_dict()",
                )
        # The policy is resolved afresh: the device's abilities may differ from build time.
        precision = resolve_precision(
            self.params.precision, self.params.mixed_precision, self.device.type
        )
        check_loader(
            params.train_loader, "NNTrainParams.train_loader", self.net_params, self.params.loss
        )
        if params.val_loader is not None:
            check_loader(
                params.val_loader, "NNTrainParams.val_loader", self.net_params, self.params.loss
            )
        root = resolve_runs_root(params.runs_root)
        resume = plan_resume(self, params, precision, root)
        config = {
            "format": FORMAT_VERSION,
            "net": self.net_params.to_json(),
            "model": self.params.to_json(),
            "train": params.identity(),
            "data": data_identity(params.train_loader, params.val_loader, params.data_id),
            "initial_weights": None if resume else self.weights_digest(),
        }
        run_id = run_id_for(config)
        if (root / run_id).exists() and not params.overwrite_existing:
            raise FileExistsError(existing_run_message(root, run_id))

        # -- side effects start here --------------------------------------------------------
        run_dir = reserve_run_dir(root, run_id, params.overwrite_existing)
        from ._io import atomic_write_yaml

        atomic_write_yaml(run_dir / "run.yaml", config)
        run = NNRun(
            id=run_id, run_dir=run_dir, config=config, status=RunStatus.RUNNING, precision=precision
        )
        run.metadata = {
            **environment_metadata(str(self.device), params.seed),
            "status": RunStatus.RUNNING.value,
            "started_at": time.time(),
            "precision": precision.record(),
            "parent_run_id": run.parent_run_id,
        }
        write_metadata(run)
        self.last_run = run
        control = control or TrainingControl()
        for sink in (*callbacks, *components):
            reset = getattr(sink, "reset", None)
            if callable(reset):
                reset()
        seed_everything(params.seed)
        optimizer = build_optimizer(self.net, params.optim)
        scheduler = build_scheduler(optimizer, params.scheduler)
        scaler = torch.amp.GradScaler(self.device.type) if precision.uses_scaler else None
        start: dict[str, Any] = {
            "optimizer": optimizer,
            "scheduler": scheduler,
            "scaler": scaler,
            "epoch": 0,
            "step": 0,
            "n_epochs": params.n_epochs,
            "planned_epochs": params.n_epochs,
            "on_started": lambda: None,
        }
        if resume is not None:
            try:
                resume.apply(self, params, run, start, callbacks, components)
            except BaseException as exc:  # validated in plan_resume; still, never leave "running"
                run.status = RunStatus.FAILED
                run.metadata.update(
                    status=RunStatus.FAILED.value, error=f"{type(exc).__name__}: {exc}"
                )
                write_metadata(run)
                raise
        loop = TrainingLoop(self, params, run, list(callbacks), control, components, start=start)
        self.precision = precision
        return loop.run_loop()

    def weights_digest(self) -> str:
        h = hashlib.sha256()
        for name, tensor in self.net.state_dict().items():
            h.update(name.encode())
            tensor_digest(h, tensor)
        return h.hexdigest()

    # -- evaluation and prediction ----------------------------------------------------------
    @contextlib.contextmanager
    def _inference(self) -> Iterator[None]:
        was_training = self.net.training
        self.net.eval()
        try:
            with torch.no_grad(), self._surface_autocast():
                yield
        finally:
            self.net.train(was_training)

    def _surface_autocast(self) -> Any:
        if "evaluate" in self.precision.covers():
            return self.precision.autocast()
        return contextlib.nullcontext()

    def _evaluate(self, loader: Any) -> EDP:
        acc = ConfusionAccumulator(self.params.loss, self.net_params.output_dim, self.device)
        with self._inference():
            for batch in loader:
                X, y = batch
                X, y = X.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
                out = self.net(X)
                acc.update(out.float(), y, self.loss_fn(out.float(), y, reduction="sum"))
        return acc.result()

    def evaluate(self, loader: Any) -> EDP:
        """Metrics over the whole loader (sums and a confusion matrix, finalized once)."""
        check_loader(loader, "loader", self.net_params, self.params.loss)
        return self._evaluate(loader)

    def predict(self, X: Any) -> Prediction:
        """Raw float32 logits and decoded classes for a tensor, array, tuple or loader."""
        outs = []
        with self._inference():
            for xb in iter_inputs(X):
                if xb.ndim < 2 or xb.shape[-1] != self.net_params.input_dim:
                    raise ConfigError(
                        "X",
                        f"a batch of shape {tuple(xb.shape)}",
                        f"features must have {self.net_params.input_dim} columns "
                        "(NNParams.input_dim)",
                    )
                outs.append(self.net(xb.to(self.device)).float())
        logits = torch.empty(0, self.net_params.output_dim) if not outs else torch.cat(outs).cpu()
        return Prediction(logits=logits, classes=decode(logits, self.params.loss))

    # -- reloading -------------------------------------------------------------------------
    @classmethod
    def from_checkpoint(
        cls,
        checkpoint: NNCheckpoint,
        device: Devices | str | None = None,
        precision: PrecisionPolicy | str | None = None,
    ) -> NNModel:
        """Rebuild the model from a checkpoint; the policy is resolved on the new device."""
        if not isinstance(checkpoint, NNCheckpoint):
            raise ConfigError(
                "checkpoint",
                checkpoint,
                "pass NNCheckpoint.load(run=..., type=Checkpoints.BEST|LAST)",
            )
        mp = checkpoint.model_params
        changes: dict[str, Any] = {}
        if device is not None:
            changes["device"] = device
        if precision is not None:
            changes["precision"] = precision
            changes["mixed_precision"] = False
        if changes:
            mp = mp.replace(**changes)
        model = cls(net_params=checkpoint.net_params, params=mp)
        model.net.load_state_dict(checkpoint.model_state)
        return model
