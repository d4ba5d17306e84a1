"""The Trainer's objective path under data parallelism, for the tests: run under torchrun
(or alone with --single, the one-process reference over the union batch). An
actor-critic with two optimizers and masked terms whose denominators differ from rank
to rank. Writes one JSON record per rank to --out.<pid>."""

from __future__ import annotations

import argparse
import hashlib
import json
import os

import torch
from torch.utils.data import TensorDataset
from trainer_factories import ac_model, ac_optims  # beside this script

from nnx_lab import (
    LossTerm,
    NNTrainerParams,
    Objective,
    ObjectiveResult,
    Trainer,
    distributed,
)


class MaskedActorCritic(Objective):
    """The actor's term over the rows a mask keeps (a denominator that differs from
    rank to rank), the critic's a weighted sum-reduced one."""

    def compute(self, net, batch, ctx):
        X, y = batch
        keep = (X[:, 0] > -0.3).float()
        actor = (((net.actor(X) - y) ** 2).squeeze(1) * keep).sum()
        critic = ((net.critic(X) + y) ** 2).sum()
        return ObjectiveResult(
            [
                LossTerm("actor", actor, keep.sum()),
                LossTerm("critic", critic, reduction="sum", weight=0.01),
            ]
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--n-train", type=int, default=120)
    ap.add_argument("--accumulation", type=int, default=1)
    ap.add_argument("--single", action="store_true", help="one process, no process group")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if not args.single:
        distributed.init_process_group()
    g = torch.Generator().manual_seed(0)
    X = torch.randn(args.n_train, 4, generator=g)
    train = TensorDataset(X, X.sum(1, keepdim=True))
    model = ac_model(features=4, hidden=8)
    params = NNTrainerParams(
        optims=ac_optims(),
        n_epochs=args.epochs,
        seed=5,
        train_loader=distributed.train_loader(train, batch_size=args.batch, seed=1),
        accumulation_steps=args.accumulation,
        checkpoint_every_s=0,
        runs_root=args.root,
        progress=False,
        log_every=1,
    )
    trainer = Trainer(model)
    run = trainer.train(
        params,
        objective=MaskedActorCritic(),
        distributed=None if args.single else distributed.DDP(),
    )
    digest = hashlib.sha256()
    for name, t in model.net.state_dict().items():
        digest.update(name.encode() + t.numpy().tobytes())
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    record = {
        "rank": distributed.rank(),
        "run_id": run.id,
        "weights": {k: v.tolist() for k, v in model.net.state_dict().items()},
        "digest": digest.hexdigest(),
        "updates": trainer.last_step.updates,
        "steps": [x["step"] for x in lines if x["event"] == "step"]
        if distributed.rank() == 0
        else None,
        "terms": [x["terms"] for x in lines if x["event"] == "step"]
        if distributed.rank() == 0
        else None,
        "config": run.config.get("distributed"),
    }
    with open(f"{args.out}.{os.getpid()}", "w") as fh:
        json.dump(record, fh)
    distributed.shutdown()


if __name__ == "__main__":
    main()
