"""The CNN and small-transformer cases of benchmarks/overhead.py.

Each case trains one module two ways: by ``NNModel.train`` (the built-in ``Nets.CONV`` /
``Nets.TRANSFORMER``) and by a hand-written PyTorch loop over the very same module class
built from the same params, with Adam, gradient clipping at 1.0 and, on CUDA, the same
precision (bf16 autocast, or fp16 autocast with a GradScaler). The timing is the whole
``train()`` call against the whole raw loop.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["NET_CASES"]


def next_token_loss(out, y):
    import torch.nn.functional as F

    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


@dataclass(frozen=True)
class NetCase:
    kind: str  # "conv" or "transformer"
    samples: int
    batch: int
    epochs: int
    target: float

    def params(self) -> Any:
        from nnx_lab import NNConvParams, NNTransformerParams

        if self.kind == "conv":
            return NNConvParams(output_dim=10, in_channels=1, image_size=28, conv_channels=(16, 32))
        return NNTransformerParams(
            vocab_size=256, n_layers=2, d_model=64, n_heads=4, max_seq_len=64
        )

    def data(self) -> Any:
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        g = torch.Generator().manual_seed(0)
        if self.kind == "conv":
            X = torch.rand(self.samples, 1, 28, 28, generator=g)
            y = torch.randint(0, 10, (self.samples,), generator=g)
        else:
            ids = torch.randint(0, 256, (self.samples, 65), generator=g)
            X, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
        return DataLoader(TensorDataset(X, y), batch_size=self.batch, shuffle=True)

    def _net(self, device: str) -> Any:
        import torch

        from nnx_lab.engine.nets_conv import ConvNN
        from nnx_lab.engine.nets_transformer import TransformerNN

        torch.manual_seed(0)
        cls = ConvNN if self.kind == "conv" else TransformerNN
        return cls(self.params()).to(device)

    def raw(self, loader: Any, device: str, precision: str | None) -> float:
        import torch
        import torch.nn.functional as F

        net = self._net(device)
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        loss_fn = F.cross_entropy if self.kind == "conv" else next_token_loss
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision or "")
        scaler = torch.amp.GradScaler(device) if precision == "fp16" else None

        def autocast():
            if dtype is None:
                return contextlib.nullcontext()
            return torch.autocast(device_type=device, dtype=dtype)

        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        net.train()
        for _ in range(self.epochs):
            for X, y in loader:
                X, y = X.to(device, non_blocking=True), y.to(device, non_blocking=True)
                opt.zero_grad(set_to_none=True)
                with autocast():
                    loss = loss_fn(net(X), y)
                if scaler is not None:
                    scaler.scale(loss).backward()
                    scaler.unscale_(opt)
                    torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                    scaler.step(opt)
                    scaler.update()
                else:
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                    opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
        return self.samples * self.epochs / (time.perf_counter() - t0)

    def nnx(
        self, loader: Any, root: str, device: str, precision: str | None
    ) -> tuple[float, float, float, float]:
        import torch

        from nnx_lab import (
            Callback,
            Devices,
            Losses,
            Nets,
            NNModel,
            NNModelParams,
            NNOptimParams,
            NNTrainParams,
            PrecisionPolicy,
        )

        class Clock(Callback):
            def on_run_started(self, event):
                self.start = time.perf_counter()

            def on_epoch_ended(self, event):
                if device == "cuda":
                    torch.cuda.synchronize()
                self.end = time.perf_counter()

        torch.manual_seed(0)
        model = NNModel(
            self.params(),
            NNModelParams(
                net=Nets.CONV if self.kind == "conv" else Nets.TRANSFORMER,
                device=Devices.CUDA if device == "cuda" else Devices.CPU,
                loss=Losses.CROSS_ENTROPY if self.kind == "conv" else next_token_loss,
                precision=None if precision in (None, "fp32") else PrecisionPolicy(precision),
            ),
        )
        params = NNTrainParams(
            n_epochs=self.epochs,
            train_loader=loader,
            seed=0,
            optim=NNOptimParams(max_lr=1e-3, grad_clip_norm=1.0),
            runs_root=tempfile.mkdtemp(dir=root),
            progress=False,
            data_id=f"synthetic-{self.kind}",  # skip hashing the synthetic tensors
        )
        clock = Clock()
        t0 = time.perf_counter()
        model.train(params=params, callbacks=[clock])
        t1 = time.perf_counter()
        n = self.samples * self.epochs
        return (
            n / (clock.end - clock.start),
            n / (t1 - t0),
            1000 * (clock.start - t0),
            1000 * (t1 - clock.end),
        )


NET_CASES = {
    "cnn": NetCase("conv", samples=4096, batch=128, epochs=2, target=0.97),
    "transformer": NetCase("transformer", samples=512, batch=32, epochs=2, target=0.97),
}
