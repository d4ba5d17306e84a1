"""The model's parameters: the network's shape (``NNParams``) and what the model is
(``NNModelParams``: net kind, device, loss, precision policy, declared task, compile),
with the ``CustomLossRef`` a saved record names a custom loss by.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .compile_options import normalize_compile
from .enums import Activations, Devices, Losses, Nets, coerce_enum
from .params_base import FrozenList, Params, finite, is_int, positive_int, set_field
from .precision import PrecisionPolicy, normalize_policy
from .registry import own_net
from .task_spec import TaskSpec

__all__ = ["CustomLossRef", "NNModelParams", "NNParams"]


@dataclass(frozen=True)
class NNParams(Params):
    """The network's shape: a feed-forward MLP of ``hidden_dims`` layers."""

    input_dim: int
    output_dim: int
    hidden_dims: Sequence[int] = ()
    dropout_prob: float = 0.0
    activation: Activations = Activations.RELU

    def __post_init__(self) -> None:
        set_field(self, "input_dim", positive_int(self.input_dim, "NNParams.input_dim"))
        set_field(self, "output_dim", positive_int(self.output_dim, "NNParams.output_dim"))
        dims = () if self.hidden_dims is None else self.hidden_dims  # NNx's "no hidden layer"
        if isinstance(dims, str | bytes) or not isinstance(dims, Sequence):
            raise ConfigError(
                "NNParams.hidden_dims", dims, "pass a list of positive integers, e.g. [32, 16]"
            )
        for d in dims:
            if not is_int(d) or int(d) < 1:
                raise ConfigError(
                    "NNParams.hidden_dims",
                    list(dims),
                    f"every hidden dim must be a positive integer (got {d!r})",
                )
        set_field(self, "hidden_dims", FrozenList(int(d) for d in dims))
        set_field(
            self,
            "dropout_prob",
            finite(
                self.dropout_prob,
                "NNParams.dropout_prob",
                low=0.0,
                high=1.0,
                high_open=True,
                fix="pass a probability in [0, 1), e.g. 0.1 (1.0 would drop every activation: "
                "docs/nnx_differences.md)",
            ),
        )
        set_field(
            self, "activation", coerce_enum(Activations, self.activation, "NNParams.activation")
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NNParams:
        return cls(**data)


@dataclass(frozen=True)
class CustomLossRef:
    """A custom loss named in a saved record; the object itself must be passed again."""

    identity: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.identity.get("custom", "custom loss"))


@dataclass(frozen=True)
class NNModelParams(Params):
    """What the model is: net kind, device, loss, precision policy and compilation.

    ``loss`` is a ``Losses`` member, or your own loss: an ``nn.Module`` or a callable
    ``loss(out, y)`` that receives the raw network output and returns the batch mean
    (§2.10). A custom loss enters the run id through its type, code and settings.

    ``compile`` is ``True`` or a dict of ``torch.compile`` options: the network is
    compiled once per model for its training steps. Options that leave the numbers as
    eager PyTorch computes them (backend ``"eager"`` / ``"aot_eager"``, ``disable``)
    keep the eager run's id; any other enters it (docs/performance.md).
    """

    net: Nets = Nets.FEED_FWD  # or a ModelSpec (§2.14): a registered factory's network
    device: Devices = Devices.CPU
    loss: Any = Losses.CROSS_ENTROPY
    precision: Any = None  # a PrecisionPolicy; None means fp32
    mixed_precision: bool = False  # NNx's legacy flag: fp16 autocast + scaler on CUDA only
    task: TaskSpec | None = None  # §2.5; None: the loss's legacy classification behaviour
    compile: Any = False  # True or a dict of torch.compile options (compile_options.py)

    def __post_init__(self) -> None:
        set_field(
            self, "net", own_net(self.net) or coerce_enum(Nets, self.net, "NNModelParams.net")
        )
        set_field(self, "device", coerce_enum(Devices, self.device, "NNModelParams.device"))
        if isinstance(self.loss, str) or not (
            callable(self.loss) or isinstance(self.loss, CustomLossRef)
        ):
            set_field(self, "loss", coerce_enum(Losses, self.loss, "NNModelParams.loss"))
        if not isinstance(self.mixed_precision, bool):
            raise ConfigError(
                "NNModelParams.mixed_precision", self.mixed_precision, "pass True or False"
            )
        set_field(self, "precision", normalize_policy(self.precision, self.mixed_precision))
        if self.mixed_precision and self.precision is not None:
            # The flag beside the fp16 policy it means says nothing more: dropped, so the
            # run id is the policy's own (NNx's rule).
            set_field(self, "mixed_precision", False)
        if self.task is not None:
            if isinstance(self.task, dict):  # a saved record's task
                set_field(self, "task", TaskSpec.from_json(self.task))
            if not isinstance(self.task, TaskSpec):
                raise ConfigError(
                    "NNModelParams.task",
                    self.task,
                    "pass TaskSpec.categorical(n), TaskSpec.regression(n) or "
                    "TaskSpec.multilabel(n), or None",
                )
            self.task.check(self.loss)
        set_field(self, "compile", normalize_compile(self.compile))

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        if self.task is None:
            del data["task"]  # absent, not null: task-less run ids stay as they were
        if self.compile is False:
            del data["compile"]  # absent: eager run ids stay as they were
        else:
            data["compile"] = dict(self.compile)
        data["precision"] = None if self.precision is None else self.precision.to_json()
        if isinstance(self.loss, CustomLossRef):
            data["loss"] = self.loss.identity
        elif not isinstance(self.loss, Losses):
            from .losses import custom_loss_identity  # torch: params stay importable without it

            data["loss"] = custom_loss_identity(self.loss)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NNModelParams:
        data = dict(data)
        if data.get("precision") is not None:
            data["precision"] = PrecisionPolicy.from_json(data["precision"])
        if isinstance(data.get("loss"), dict):
            data["loss"] = CustomLossRef(data["loss"])
        return cls(**data)
