"""``NNDataset``: train / val / test loaders from a torchvision-style dataset class (§2.5).

A torchvision-style class is constructed as ``ds_class(root, train=..., transform=...)``
and indexed as ``ds[i] -> (image, target)``: torchvision's MNIST, FashionMNIST and
CIFAR10 are, and so is any class of yours with that shape. torchvision is not needed
(nnx-lab never imports it: the class is passed in). Nothing is downloaded at run time:
``download=True`` is refused, and ``download=False`` is passed to a class that takes it,
so a missing data set fails at once instead of fetching from the network.

The training set is split into train and validation by ``val_proportion`` with a seeded
permutation; the test set is the class's ``train=False`` set. ``train_transform`` applies
to the training rows, ``eval_transform`` to validation and test (each defaults to
``transform``): the class is constructed once per transform, so the validation rows of
the training set are read with the evaluation transform.
"""

from __future__ import annotations

import inspect
import numbers
from typing import Any

import torch
from torch.utils.data import DataLoader, Subset

from ..errors import ConfigError
from ._tabular import resolve_batch_sizes

__all__ = ["NNDataset"]

_NO_DOWNLOAD = (
    "nnx-lab never downloads at run time (a run must not depend on the network, and a "
    "download is code fetched from elsewhere): fetch the data once beforehand, e.g. "
    "torchvision.datasets.MNIST(root, download=True) in a setup step, then pass root="
)


def _check_class(ds_class: Any) -> None:
    if not callable(ds_class) or not inspect.isclass(ds_class):
        raise ConfigError(
            "NNDataset.ds_class",
            ds_class,
            "pass a dataset class built as ds_class(root, train=..., transform=...), e.g. "
            "torchvision.datasets.MNIST",
        )
    try:
        sig = inspect.signature(ds_class)
    except (TypeError, ValueError):
        return  # a C-implemented class: its constructor will say
    params = sig.parameters
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
    missing = [n for n in ("root", "train", "transform") if n not in params and not takes_kwargs]
    if missing:
        raise ConfigError(
            "NNDataset.ds_class",
            ds_class.__qualname__,
            f"its constructor takes no {missing}: NNDataset builds torchvision-style "
            "classes, ds_class(root, train=True|False, transform=...)",
        )


def _takes_download(ds_class: Any) -> bool:
    try:
        return "download" in inspect.signature(ds_class).parameters
    except (TypeError, ValueError):
        return False


class NNDataset:
    """Loaders of a torchvision-style image dataset.

    ``batch_sizes=(train, val, test)``: ``None`` is one batch holding the whole split.
    The training loader shuffles with a generator seeded by ``seed``; the split is drawn
    with ``seed`` too, so the same arguments give the same batches (and run ids)."""

    def __init__(
        self,
        ds_class: Any,
        transform: Any = None,
        *,
        train_transform: Any = None,
        eval_transform: Any = None,
        batch_sizes: tuple[Any, Any, Any] = (None, None, None),
        val_proportion: float = 0.1,
        root: Any = "data",
        seed: int = 0,
        download: bool = False,
        num_workers: int = 0,
    ) -> None:
        # every check before the dataset class runs
        if download is not False:
            raise ConfigError("NNDataset.download", download, _NO_DOWNLOAD)
        requested = resolve_batch_sizes(batch_sizes, "NNDataset")
        _check_class(ds_class)
        if (
            isinstance(val_proportion, bool)
            or not isinstance(val_proportion, numbers.Real)
            or not 0 <= val_proportion < 1
        ):
            raise ConfigError(
                "NNDataset.val_proportion", val_proportion, "pass a fraction in [0, 1), e.g. 0.1"
            )
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
            raise ConfigError("NNDataset.seed", seed, "pass an integer seed >= 0")
        for name, fn in (
            ("transform", transform),
            ("train_transform", train_transform),
            ("eval_transform", eval_transform),
        ):
            if fn is not None and not callable(fn):
                raise ConfigError(f"NNDataset.{name}", fn, "pass a callable (image -> tensor)")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ConfigError("NNDataset.num_workers", num_workers, "pass an integer >= 0")
        train_tf = train_transform if train_transform is not None else transform
        eval_tf = eval_transform if eval_transform is not None else transform
        extra = {"download": False} if _takes_download(ds_class) else {}

        def build(train: bool, tf: Any) -> Any:
            return ds_class(root=root, train=train, transform=tf, **extra)

        train_set = build(True, train_tf)
        val_source = build(True, eval_tf) if eval_tf is not train_tf else train_set
        test_set = build(False, eval_tf)
        n = len(train_set)
        n_val = round(n * float(val_proportion))
        order = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed))).tolist()
        rows = {"train": sorted(order[n_val:]), "val": sorted(order[:n_val])}
        parts = {
            "train": Subset(train_set, rows["train"]),
            "val": Subset(val_source, rows["val"]),
            "test": test_set,
        }
        loaders: dict[str, DataLoader | None] = {}
        resolved = []
        for slot, bs in zip(("train", "val", "test"), requested, strict=True):
            part = parts[slot]
            size = len(part)
            if size == 0:
                loaders[slot] = None
                resolved.append(bs if bs is not None else 1)
                continue
            bs = size if bs is None else bs
            resolved.append(bs)
            gen = torch.Generator().manual_seed(int(seed)) if slot == "train" else None
            loaders[slot] = DataLoader(
                part, batch_size=bs, shuffle=slot == "train", generator=gen, num_workers=num_workers
            )
        self.ds_class, self.root, self.seed = ds_class, root, int(seed)
        self.val_proportion = float(val_proportion)
        self.requested_batch_sizes = requested
        self.batch_sizes: tuple[int, int, int] = tuple(resolved)  # type: ignore[assignment]
        self.rows = rows
        self.train_loader = loaders["train"]
        self.val_loader = loaders["val"]
        self.test_loader = loaders["test"]

    def __repr__(self) -> str:
        sizes = {
            slot: (0 if loader is None else len(loader.dataset))
            for slot, loader in (
                ("train", self.train_loader),
                ("val", self.val_loader),
                ("test", self.test_loader),
            )
        }
        return (
            f"NNDataset({self.ds_class.__qualname__}, rows={sizes}, "
            f"batch_sizes={self.batch_sizes}, seed={self.seed})"
        )
