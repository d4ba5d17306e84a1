"""``python -m nnx_lab quickstart``: train the §1 quickstart and print a summary."""

from __future__ import annotations

import argparse
import sys


def quickstart(runs_root: str | None, overwrite: bool) -> int:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from nnx_lab import (
        Activations,
        Devices,
        EarlyStopping,
        Losses,
        Nets,
        NNModel,
        NNModelParams,
        NNOptimParams,
        NNParams,
        NNSchedulerParams,
        NNTrainParams,
        Optims,
    )

    g = torch.Generator().manual_seed(0)  # the same synthetic data on every call
    X_train, y_train = torch.randn(256, 8, generator=g), torch.randint(0, 3, (256,), generator=g)
    X_val, y_val = torch.randn(64, 8, generator=g), torch.randint(0, 3, (64,), generator=g)
    train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=32, shuffle=True)
    val_loader = DataLoader(TensorDataset(X_val, y_val), batch_size=32)
    net_params = NNParams(
        input_dim=8,
        output_dim=3,
        hidden_dims=[32, 16],
        dropout_prob=0.1,
        activation=Activations.RELU,
    )
    model_params = NNModelParams(net=Nets.FEED_FWD, device=Devices.CPU, loss=Losses.CROSS_ENTROPY)
    model = NNModel(net_params=net_params, params=model_params)
    train_params = NNTrainParams(
        n_epochs=10,
        seed=42,
        train_loader=train_loader,
        val_loader=val_loader,
        optim=NNOptimParams(
            name=Optims.ADAM,
            max_lr=1e-2,
            momentum=(0.9, 0.999),
            weight_decay=5e-5,
            grad_clip_norm=1.0,
        ),
        scheduler=NNSchedulerParams(
            min_lr=1e-7, factor=0.5, patience=3, cooldown=1, threshold=1e-3
        ),
        runs_root=runs_root,
        overwrite_existing=overwrite,
    )
    try:
        run = model.train(params=train_params, callbacks=[EarlyStopping(patience=5)])
    except FileExistsError as exc:
        print(f"error: {exc}\n(run again with --overwrite)", file=sys.stderr)
        return 1
    result = model.predict(X=X_val)
    final = run.idps[-1]
    accuracy = float((result.classes == y_val).float().mean())
    print(
        f"trained {len(run.idps)} iterations over {final.epoch} epochs; "
        f"status {run.status.value}; saved under {run.run_dir}/"
    )
    print(
        f"final train loss {final.train_edp.loss:.4f}; validation loss "
        f"{final.val_edp.loss:.4f}, accuracy {final.val_edp.accuracy:.3f}"
    )
    print(
        f"predicted {len(result.classes)} samples (accuracy {accuracy:.3f} on random labels: "
        "about 1/3 is expected)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnx_lab", description="nnx-lab command line")
    sub = parser.add_subparsers(dest="command", required=True)
    qs = sub.add_parser("quickstart", help="train the NNx §1 quickstart and print a summary")
    qs.add_argument("--runs-root", default=None, help="where runs are written (default ./runs)")
    qs.add_argument(
        "--overwrite", action="store_true", help="replace an earlier run of the same configuration"
    )
    args = parser.parse_args(argv)
    if args.command == "quickstart":
        return quickstart(args.runs_root, args.overwrite)
    return 2  # pragma: no cover - argparse refuses unknown commands first


if __name__ == "__main__":
    sys.exit(main())
