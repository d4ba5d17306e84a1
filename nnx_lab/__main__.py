"""``python -m nnx_lab quickstart``: train the §1 quickstart and print a summary."""

from __future__ import annotations

import argparse
import sys


def _wine() -> tuple[object, list[str], str, str]:
    """scikit-learn's bundled wine data (178 rows, 13 features, 3 cultivars), or, without
    scikit-learn, a synthetic frame of the same shape with a learnable rule."""
    import pandas as pd

    try:
        from sklearn.datasets import load_wine
    except ImportError:
        import numpy as np

        rng = np.random.default_rng(0)
        centers = rng.normal(0, 2.0, size=(3, 13))
        labels = rng.integers(0, 3, size=178)
        X = centers[labels] + rng.normal(0, 1.0, size=(178, 13))
        cols = [f"x{i}" for i in range(13)]
        frame = pd.DataFrame(X, columns=cols).assign(target=labels)
        return frame, cols, "target", "synthetic 3-class data (pip install scikit-learn for wine)"
    frame = load_wine(as_frame=True).frame
    cols = [c for c in frame.columns if c != "target"]
    return frame, cols, "target", "scikit-learn's wine data"


def quickstart(runs_root: str | None, overwrite: bool) -> int:
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
        NNTabularDataset,
        NNTrainParams,
        Optims,
    )

    frame, features, target, source = _wine()
    # 1. Data: train / validation / test splits, standardized on the training rows only
    dataset = NNTabularDataset(
        frame, features, target, batch_sizes=(16, None, None), seed=0, standardize=True
    )
    # 2. Model
    net_params = NNParams(
        input_dim=dataset.input_dim,
        output_dim=dataset.output_dim,
        hidden_dims=[32, 16],
        dropout_prob=0.1,
        activation=Activations.RELU,
    )
    model_params = NNModelParams(net=Nets.FEED_FWD, device=Devices.CPU, loss=Losses.CROSS_ENTROPY)
    model = NNModel(net_params=net_params, params=model_params)
    # 3. Train
    train_params = NNTrainParams(
        n_epochs=20,
        seed=42,
        train_loader=dataset.train_loader,
        val_loader=dataset.val_loader,
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
    # 4. Use it: the held-out test split, never seen in training or selection
    test = model.evaluate(dataset.test_loader)
    result = model.predict(X=dataset.test_loader)
    final = run.epochs[-1]
    print(f"data: {source}, {dataset}")
    print(
        f"trained {len(run.idps)} iterations over {final['epoch']} epochs; "
        f"status {run.status.value}; saved under {run.run_dir}/"
    )
    print(
        f"final validation loss {final['val']['loss']:.4f}, accuracy {final['val']['accuracy']:.3f}"
    )
    print(
        f"predicted {len(result.classes)} test samples: accuracy {test.accuracy:.3f} "
        f"(chance is about {1 / dataset.output_dim:.2f})"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnx_lab", description="nnx-lab command line")
    sub = parser.add_subparsers(dest="command", required=True)
    qs = sub.add_parser(
        "quickstart", help="train the NNx §1 quickstart on the wine data and print a summary"
    )
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
