"""NNDataset: loaders of a torchvision-style dataset class, with no torchvision and no
download."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest
import torch

from nnx_lab import (
    ConfigError,
    Losses,
    Nets,
    NNConvParams,
    NNDataset,
    NNModel,
    NNModelParams,
    NNTrainParams,
)


class FakeDigits:
    """A torchvision-style class: (root, train, transform, download) and ds[i]."""

    built: ClassVar[list[tuple[bool, object]]] = []

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        assert download is False  # nnx-lab never asks for a download
        FakeDigits.built.append((train, transform))
        g = np.random.default_rng(0 if train else 1)
        self.images = g.random((100 if train else 30, 8, 8), dtype=np.float32)
        self.labels = g.integers(0, 10, 100 if train else 30)
        self.transform = transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        img = self.images[i]
        img = self.transform(img) if self.transform else torch.from_numpy(img)[None]
        return img, int(self.labels[i])


def to_tensor(img):
    return torch.from_numpy(np.ascontiguousarray(img))[None]


def flip(img):
    return torch.from_numpy(np.ascontiguousarray(img[:, ::-1]))[None]


def test_the_splits_batches_and_transforms(tmp_path):
    FakeDigits.built.clear()
    ds = NNDataset(
        FakeDigits,
        transform=to_tensor,
        train_transform=flip,
        batch_sizes=(16, None, None),
        val_proportion=0.2,
        root=tmp_path,
    )
    assert len(ds.train_loader.dataset) == 80
    assert len(ds.val_loader.dataset) == 20
    assert len(ds.test_loader.dataset) == 30
    assert ds.batch_sizes == (16, 20, 30)
    assert set(ds.rows["train"]).isdisjoint(ds.rows["val"])
    X, y = next(iter(ds.train_loader))
    assert X.shape == (16, 1, 8, 8)
    assert y.dtype == torch.int64
    assert (True, flip) in FakeDigits.built
    assert (True, to_tensor) in FakeDigits.built  # validation rows: the eval transform
    assert (False, to_tensor) in FakeDigits.built
    again = NNDataset(FakeDigits, transform=to_tensor, batch_sizes=(16, None, None), root=tmp_path)
    other = NNDataset(FakeDigits, transform=to_tensor, batch_sizes=(16, None, None), root=tmp_path)
    assert again.rows == other.rows
    assert torch.equal(next(iter(again.train_loader))[0], next(iter(other.train_loader))[0])


def test_a_cnn_trains_on_it(tmp_path):
    ds = NNDataset(FakeDigits, transform=to_tensor, batch_sizes=(32, None, None), root=tmp_path)
    model = NNModel(
        NNConvParams(output_dim=10, image_size=8, conv_channels=(4,)),
        NNModelParams(net=Nets.CONV, loss=Losses.CROSS_ENTROPY),
    )
    params = NNTrainParams(
        n_epochs=1,
        train_loader=ds.train_loader,
        val_loader=ds.val_loader,
        runs_root=tmp_path / "runs",
        data_id="fake-digits-v1",
    )
    assert model.train(params).status.value == "finished"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"download": True}, "NNDataset.download"),
        ({"batch_sizes": (0, None, None)}, "NNDataset.batch_sizes[0] (train)"),
        ({"batch_sizes": (16, None)}, "NNDataset.batch_sizes"),
        ({"val_proportion": 1.0}, "NNDataset.val_proportion"),
        ({"transform": "to_tensor"}, "NNDataset.transform"),
        ({"seed": -1}, "NNDataset.seed"),
    ],
)
def test_refusals_come_before_the_class_runs(kwargs, field):
    FakeDigits.built.clear()
    with pytest.raises(ConfigError) as info:
        NNDataset(FakeDigits, **kwargs)
    assert info.value.field == field
    assert FakeDigits.built == []
    if field == "NNDataset.download":
        assert "never downloads" in info.value.fix


def test_a_class_of_another_shape_is_refused():
    class NotVision:
        def __init__(self, path):
            self.path = path

    with pytest.raises(ConfigError, match="torchvision-style"):
        NNDataset(NotVision)
    with pytest.raises(ConfigError):
        NNDataset(FakeDigits(root="."))  # an instance, not the class
