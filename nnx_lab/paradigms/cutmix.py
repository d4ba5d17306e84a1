"""CutMix (Yun et al. 2019): paste a box of a shuffled copy of the batch into each image
(§3.4).

Per batch, from the step's own generator: ``lam0 ~ Beta(alpha, alpha)``, a permutation
``perm`` of the rows and the box's centre ``(cy, cx)`` uniform over the image. The box is
``H·√(1 − lam0)`` by ``W·√(1 − lam0)`` (integer sides), clipped to the image; inside it
every image takes the pixels of its ``perm`` partner. The loss weight is the area that
is really kept, ``lam = 1 − box area / (H·W)``:
``lam · loss(out, y) + (1 − lam) · loss(out, y[perm])``. Images only: a batch whose
inputs are not ``(N, C, H, W)`` is refused before any run (``check``).
"""

from __future__ import annotations

import math

import torch

from ..errors import DataError
from ._step import beta_draw
from .mixup import MixingStep

__all__ = ["cutmix_box", "cutmix_train_step_factory"]


def cutmix_box(lam0: float, H: int, W: int, cy: int, cx: int) -> tuple[int, int, int, int]:
    """``(y1, y2, x1, x2)`` of the box for ``lam0`` centred at ``(cy, cx)``, clipped."""
    ratio = math.sqrt(1.0 - lam0)
    cut_h, cut_w = int(H * ratio), int(W * ratio)
    y1, y2 = max(cy - cut_h // 2, 0), min(cy + cut_h // 2, H)
    x1, x2 = max(cx - cut_w // 2, 0), min(cx + cut_w // 2, W)
    return y1, y2, x1, x2


class CutMixStep(MixingStep):
    factory = "cutmix_train_step_factory"
    component_name = "cutmix"

    def mix(self, X: torch.Tensor) -> tuple[torch.Tensor, float, torch.Tensor]:
        H, W = int(X.shape[2]), int(X.shape[3])
        lam0 = beta_draw(self.alpha, self.generator)
        perm = torch.randperm(X.shape[0], generator=self.generator)
        cy = int(torch.randint(0, H, (), generator=self.generator))
        cx = int(torch.randint(0, W, (), generator=self.generator))
        y1, y2, x1, x2 = cutmix_box(lam0, H, W, cy, cx)
        perm = perm.to(X.device)
        mixed = X.clone()
        mixed[:, :, y1:y2, x1:x2] = X[perm, :, y1:y2, x1:x2]
        return mixed, 1.0 - (y2 - y1) * (x2 - x1) / (H * W), perm

    def check_inputs(self, X: torch.Tensor, where: str) -> None:
        if X.dim() != 4:
            raise DataError(
                where,
                f"the inputs have shape {tuple(X.shape)}, not images (N, C, H, W)",
                "CutMix pastes image boxes: pass 4-D image batches, or use "
                "mixup_train_step_factory for other inputs",
            )
        super().check_inputs(X, where)


def cutmix_train_step_factory(alpha: float = 1.0, *, seed: int = 0) -> CutMixStep:
    """A ``train_step_fn`` training on CutMix images, ``lam0 ~ Beta(alpha, alpha)``, the
    permutation and the box drawn from its own generator (seeded by ``seed``,
    checkpointed with the run)."""
    return CutMixStep(alpha, seed)
