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
    Losses,
    LossTerm,
    MetricSpec,
    MonitorSpec,
    Nets,
    NNConvParams,
    NNModel,
    NNModelParams,
    NNMoEParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNTrainParams,
    Objective,
    ObjectiveResult,
    distributed,
)
from nnx_lab.example_data import digits_images


def data(n_train: int, n_val: int):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(8, 3, generator=g)
    X = torch.randn(n_train, 8, generator=g)
    Xv = torch.randn(n_val, 8, generator=g)
    return TensorDataset(X, (X @ w).argmax(1)), TensorDataset(Xv, (Xv @ w).argmax(1))


class SeenRows(TensorDataset):
    """A TensorDataset that notes the rows it hands out (which rank saw which row), one
    list per epoch (``on_epoch_started``) after one for the reads before training."""

    def __init__(self, *tensors: torch.Tensor) -> None:
        super().__init__(*tensors)
        self.seen: list[list[int]] = [[]]

    def __getitem__(self, index: int):
        self.seen[-1].append(int(index))
        return super().__getitem__(index)

    def on_epoch_started(self, event) -> None:
        self.seen.append([])


def images(n_train: int, n_val: int):
    """The digits as (N, 1, 8, 8) images: the first n_train rows train, the next validate."""
    X, y = digits_images()
    train = SeenRows(X[:n_train], y[:n_train])
    return train, TensorDataset(X[n_train : n_train + n_val], y[n_train : n_train + n_val])


def network(kind: str, precision: str | None) -> NNModel:
    if kind == "conv":
        conv = NNConvParams(output_dim=10, in_channels=1, image_size=8, conv_channels=(4, 8))
        params = NNModelParams(net=Nets.CONV, loss=Losses.CROSS_ENTROPY, precision=precision)
        return NNModel(conv, params)
    if kind == "moe":
        moe = NNMoEParams(input_dim=8, output_dim=3, num_experts=3, top_k=1, hidden_dim=8)
        params = NNModelParams(net=Nets.FEED_FWD_MOE, precision=precision)
        return NNModel(moe, params)
    return NNModel(
        net_params=f.net_params(dropout_prob=0.0), params=NNModelParams(precision=precision)
    )


class MaskedTerms(Objective):
    """Two terms whose denominators differ from rank to rank: a cross-entropy over the
    rows a mask keeps, and a weighted squared-output penalty over the output elements."""

    def compute(self, net, batch, ctx):
        X, y = batch
        out = net(X)
        keep = (X[:, 0] > -0.3).float()
        ce = torch.nn.functional.cross_entropy(out, y, reduction="none")
        return ObjectiveResult(
            [
                LossTerm("ce", (ce * keep).sum(), keep.sum()),
                LossTerm("l2", (out**2).sum(), out.numel(), weight=0.1),
            ],
            record={"kept": keep.mean()},
        )


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
    ap.add_argument("--net", default="mlp", choices=("mlp", "conv", "moe"))
    ap.add_argument("--objective", action="store_true", help="a masked two-term objective")
    ap.add_argument("--health", action="store_true", help="a HealthProbe at every update")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if not args.single:
        distributed.init_process_group()
    train_set, val_set = (images if args.net == "conv" else data)(args.n_train, args.n_val)
    model = network(args.net, args.precision)
    shapes: set[tuple[int, ...]] = set()  # the input shapes the network trained on
    model.net.register_forward_pre_hook(
        lambda module, inputs: shapes.add(tuple(inputs[0].shape)) if module.training else None
    )
    local_aux: list[float] = []  # a MoE's term on this rank's rows, per training forward
    if args.net == "moe":
        model.net.register_forward_hook(
            lambda module, i, o: (
                local_aux.append(float(module.load_balance_loss)) if module.training else None
            )
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
    callbacks = [train_set] if isinstance(train_set, SeenRows) else []
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
    probe = None
    if args.health:
        from nnx_lab import HealthProbe

        probe = HealthProbe(every=1)
        callbacks.append(probe)
    try:
        run = model.train(
            params,
            callbacks=callbacks,
            distributed=None
            if args.single
            else distributed.DDP(stop_check_every=args.stop_check_every),
            objective=MaskedTerms() if args.objective else None,
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
        # each step's confusion metrics: the union's rows, counted across the ranks
        "step_metrics": [
            [p.train_edp.samples, p.train_edp.accuracy, p.train_edp.precision, p.train_edp.f1]
            for p in run.idps
        ],
        "val": run.epochs[-1]["val"],
        "weights": {k: v.tolist() for k, v in model.net.state_dict().items()},
        "digest": digest.hexdigest(),
        "stop_reason": run.metadata.get("stop_reason"),
        "epochs": [
            {k: v for k, v in e.items() if k not in ("seconds", "time")} for e in run.epochs
        ],
        "extra": [p.train_edp.extra for p in run.idps],
        "aux": [p.get("aux") for p in _step_lines(run)],
        "shapes": sorted(shapes),
        "seen": getattr(train_set, "seen", None),
        "local_aux": local_aux,
        "terms": [p.get("terms") for p in _step_lines(run)],
        "health": None if probe is None else [r.grad_norm for r in probe.records],
    }
    if args.net != "mlp":  # after the fit: predict and evaluate on each rank alone
        X_val = val_set.tensors[0]
        record["predict"] = model.predict(X_val).logits.tolist()
        ev = model.evaluate(torch.utils.data.DataLoader(val_set, batch_size=8))
        record["evaluate"] = {"loss": ev.loss, "accuracy": ev.accuracy, "samples": ev.samples}
    with open(f"{args.out}.{os.getpid()}", "w") as fh:
        json.dump(record, fh)
    distributed.shutdown()


def _step_lines(run) -> list[dict]:
    log = Path(run.run_dir) / "metrics.jsonl" if run.run_dir is not None else None
    if log is None or not log.exists():  # a rank other than 0 writes no run directory
        return []
    lines = (json.loads(line) for line in log.read_text().splitlines())
    return [line for line in lines if line["event"] == "step"]


if __name__ == "__main__":
    main()
