"""A data-parallel training script for the tests: run under torchrun (or alone, for the
single-process reference). Writes one JSON line per rank to --out."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import torch
from torch.utils.data import TensorDataset

sys.path.insert(0, str(Path(__file__).parent))
import engine_factories as f

from nnx_lab import (
    MetricSpec,
    MonitorSpec,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNTrainParams,
    distributed,
)


def data(n_train: int, n_val: int):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(8, 3, generator=g)
    X = torch.randn(n_train, 8, generator=g)
    Xv = torch.randn(n_val, 8, generator=g)
    return TensorDataset(X, (X @ w).argmax(1)), TensorDataset(Xv, (Xv @ w).argmax(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--precision", default=None)
    ap.add_argument("--n-train", type=int, default=128)
    ap.add_argument("--n-val", type=int, default=33)
    ap.add_argument("--accumulation", type=int, default=1)
    ap.add_argument("--resume", default=None)
    ap.add_argument("--resume-mode", default="stateful")
    ap.add_argument("--stop-after", type=int, default=0)
    ap.add_argument("--stop-check-every", type=int, default=None)
    ap.add_argument("--single", action="store_true", help="one process, no process group")
    ap.add_argument("--declared", action="store_true", help="declared metrics and a monitor")
    ap.add_argument("--finetune", action="store_true", help="a frozen layer and two rules")
    ap.add_argument("--fail-on-rank1", action="store_true", help="rank 1 raises at epoch 1's end")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if not args.single:
        distributed.init_process_group()
    train_set, val_set = data(args.n_train, args.n_val)
    model = NNModel(
        net_params=f.net_params(dropout_prob=0.0),
        params=NNModelParams(precision=args.precision),
    )
    optim = NNOptimParams(max_lr=1e-2, grad_clip_norm=1.0)
    if args.finetune:
        model.freeze("layers.0.*")
        optim = optim.replace(
            param_groups=[
                NNParamGroupSpec("layers.2.*", lr_multiplier=0.1),
                NNParamGroupSpec("*.bias", weight_decay=0.0),
            ]
        )
    params = NNTrainParams(
        n_epochs=args.epochs,
        seed=5,
        train_loader=distributed.train_loader(train_set, batch_size=args.batch, seed=1),
        val_loader=distributed.validation_loader(val_set, batch_size=8),
        optim=optim,
        accumulation_steps=args.accumulation,
        checkpoint_every_s=0,
        runs_root=args.root,
        resume_from_run_id=args.resume,
        resume_mode=args.resume_mode,
    )
    if args.declared:
        params = params.replace(
            metrics=[MetricSpec(n) for n in ("nll", "accuracy", "f1_weighted", "auroc")],
            monitor=MonitorSpec("auroc", min_delta=1e-3),
            extra_metrics={"rows": lambda y_true, y_pred: float(len(y_true))},
        )
    callbacks = []
    if args.stop_after:

        class StopOnRankZero:
            def on_attach(self, control):
                self.control = control

            def on_step_ended(self, event):
                if distributed.rank() == 0 and event.step == args.stop_after:
                    self.control.request_stop("stopped on rank 0")

        callbacks.append(StopOnRankZero())
    if args.fail_on_rank1:

        class FailOnRankOne:
            def on_epoch_ended(self, event):
                if distributed.rank() == 1 and event.epoch == 1:
                    raise ValueError("rank 1 fails at the end of epoch 1")

        callbacks.append(FailOnRankOne())
    try:
        run = model.train(
            params,
            callbacks=callbacks,
            distributed=None
            if args.single
            else distributed.DDP(stop_check_every=args.stop_check_every),
        )
    except Exception as exc:  # the test reads what was refused
        with open(f"{args.out}.{os.getpid()}", "w") as fh:
            json.dump({"rank": distributed.rank(), "error": f"{type(exc).__name__}: {exc}"}, fh)
        distributed.shutdown()  # as a try/finally would: after a failure it waits for none
        raise SystemExit(3) from exc
    digest = hashlib.sha256()
    for name, t in model.net.state_dict().items():
        digest.update(name.encode() + t.numpy().tobytes())
    record = {
        "rank": distributed.rank(),
        "world": distributed.world_size(),
        "run_id": run.id,
        "status": run.status.value,
        "steps": len(run.idps),
        "losses": [p.train_edp.loss for p in run.idps],
        "val": run.epochs[-1]["val"],
        "weights": {k: v.tolist() for k, v in model.net.state_dict().items()},
        "digest": digest.hexdigest(),
        "stop_reason": run.metadata.get("stop_reason"),
        "epochs": [
            {k: v for k, v in e.items() if k not in ("seconds", "time")} for e in run.epochs
        ],
        "extra": [p.train_edp.extra for p in run.idps],
    }
    with open(f"{args.out}.{os.getpid()}", "w") as fh:
        json.dump(record, fh)
    distributed.shutdown()


if __name__ == "__main__":
    main()
