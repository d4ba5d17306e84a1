"""Training paradigms on the public hooks (§3.4): knowledge distillation, SimCLR,
Mixup and CutMix as ``train_step_fn`` factories for ``NNModel.train`` (and distillation
as an ``Objective`` too). Each is built on the step, objective and component hooks
only; docs/paradigms.md."""

from .cutmix import cutmix_box, cutmix_train_step_factory
from .kd import kd_objective, kd_train_step_factory, soft_kl_sum
from .mixup import mixup_train_step_factory
from .simclr import nt_xent_loss, paired_views, simclr_train_step_factory

__all__ = [
    "cutmix_box",
    "cutmix_train_step_factory",
    "kd_objective",
    "kd_train_step_factory",
    "mixup_train_step_factory",
    "nt_xent_loss",
    "paired_views",
    "simclr_train_step_factory",
    "soft_kl_sum",
]
