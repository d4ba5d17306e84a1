"""Where an ``NNModel``'s network comes from, checked before anything is built (§2.14):

- ``NNParams`` and a ``Nets`` member: the built-in network, built under ``init_seed``;
- ``NNModelParams(net=ModelSpec(...))``: a registered factory, built under the spec's seed;
- ``NNModel(module=...)``: an instance, wrapped as it is (runtime-only).

Every path leaves the caller's random streams as they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ConfigError
from .adapters import BatchAdapter, adapt_source
from .data import first_batch, iter_inputs
from .enums import Devices
from .net_kinds import check_net_params
from .net_shape import NetShape, module_topology, probe_output_dim, shape_of
from .nets import build_net
from .params import CustomLossRef, NNModelParams
from .registry import RUNTIME_FIX, ModelSpec, RuntimeModuleRef, build_from_spec

__all__ = [
    "BuiltNetwork",
    "adapt_train_params",
    "build_network",
    "check_adapter",
    "current_params",
    "learn_output_dim",
    "model_device",
    "net_json",
    "refuse_loss_ref",
]


@dataclass
class BuiltNetwork:
    net: torch.nn.Module
    shape: NetShape
    params: NNModelParams  # the params as the model holds them (a wrapped module's record)


def check_adapter(adapter: Any) -> BatchAdapter | None:
    if adapter is None or isinstance(adapter, BatchAdapter):
        return adapter
    raise ConfigError(
        "batch_adapter",
        adapter,
        "pass PositionalInputs(n_inputs=...), KeywordInputs(names, target=...), a "
        "BatchAdapter subclass, or None for (x, y) batches",
    )


def net_json(net_params: Any, params: NNModelParams) -> Any:
    """The run record's ``net``: the MLP's params, or the spec / the module's record."""
    return net_params.to_json() if net_params is not None else params.net.to_json()


def current_params(net: torch.nn.Module, params: NNModelParams) -> NNModelParams:
    """A wrapped module's params with its topology as it is now (a layer frozen since
    construction changes what a run trains); other params as they are."""
    if not isinstance(params.net, RuntimeModuleRef):
        return params
    now = RuntimeModuleRef(module_topology(net))
    return params if now == params.net else params.replace(net=now)


def _wrap(
    module: Any, net_params: Any, params: NNModelParams, device: torch.device
) -> BuiltNetwork:
    if not isinstance(module, torch.nn.Module):
        raise ConfigError("module", module, "pass an nn.Module instance")
    if net_params is not None:
        raise ConfigError(
            "net_params",
            net_params,
            "a wrapped module has its own shape: pass module= without net_params",
        )
    if isinstance(params.net, ModelSpec):
        raise ConfigError(
            "NNModelParams.net",
            params.net,
            "pass either module= (an instance) or NNModelParams(net=ModelSpec(...)), not both",
        )
    net = module.to(device)  # in place: the model trains the very instance
    ref = RuntimeModuleRef(module_topology(net))
    return BuiltNetwork(
        net, NetShape(None, None, False, "the wrapped module"), params.replace(net=ref)
    )


def build_network(
    net_params: Any, params: NNModelParams, module: Any, init_seed: int, device: torch.device
) -> BuiltNetwork:
    """The model's network and what the data checks know of it; refusals first."""
    if module is not None:
        return _wrap(module, net_params, params, device)
    spec = params.net
    if isinstance(spec, RuntimeModuleRef):
        raise ConfigError(
            "NNModelParams.net",
            f"a runtime module ({spec.name})",
            "its weights reload only into the module passed again: "
            "NNModel.from_checkpoint(ckpt, module=YourModule(...)); " + RUNTIME_FIX,
        )
    if isinstance(spec, ModelSpec):
        if net_params is not None:
            raise ConfigError(
                "net_params",
                net_params,
                "a ModelSpec's network is its factory's: drop net_params (put the sizes in "
                "ModelSpec(config={...}))",
            )
        if init_seed != 0:
            raise ConfigError(
                "init_seed", init_seed, "a ModelSpec carries its own seed: ModelSpec(..., seed=)"
            )
        net = build_from_spec(spec).to(device)
        # a factory's module may declare its width (batches the engine cannot probe)
        width = getattr(net, "output_dim", None)
        width = int(width) if isinstance(width, int) and not isinstance(width, bool) else None
        return BuiltNetwork(net, NetShape(None, width, False, f"ModelSpec {spec.id!r}"), params)
    check_net_params(params.net, net_params)
    if params.task is not None:
        if params.task.n_outputs is None:  # TaskSpec.categorical(): the net's width
            params = params.replace(task=params.task.with_outputs(net_params.output_dim))
        params.task.check(params.loss, net_params.output_dim)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(init_seed)
        net = build_net(params.net, net_params).to(device)
    return BuiltNetwork(net, shape_of(net_params), params)


def adapt_train_params(params: Any, adapter: BatchAdapter | None) -> Any:
    """``params`` whose loaders are read through ``adapter`` (as they are without one)."""
    if adapter is None:
        return params
    train = adapt_source(params.train_loader, adapter)
    val = adapt_source(params.val_loader, adapter)
    if train is params.train_loader and val is params.val_loader:
        return params
    return params.replace(train_loader=train, val_loader=val)


def learn_output_dim(
    net: torch.nn.Module,
    shape: NetShape,
    source: Any,
    field: str,
    device: torch.device,
    task: Any,
    loss: Any,
) -> NetShape:
    """``shape`` with the width an own module's outputs have on ``source``'s first batch
    (a loader's first ``(X, y)`` or the first rows of a tensor to predict)."""
    if isinstance(source, torch.Tensor) or not hasattr(source, "__iter__"):
        X = next(iter_inputs(source, cast=False), None)
    else:
        batch = first_batch(source, field)
        X = batch[0] if isinstance(batch, tuple | list) and batch else batch
    if X is None:
        raise ConfigError(field, "no rows", "pass at least one row")
    k = probe_output_dim(net, X, device, field)
    if task is not None:
        task.check(loss, k)
    return shape.with_output_dim(k)


def model_device(kind: Devices) -> torch.device:
    """The torch device of ``NNModelParams.device``, refused when it is absent."""
    if kind is Devices.CUDA and not torch.cuda.is_available():
        raise ConfigError(
            "NNModelParams.device",
            kind,
            "no CUDA device is present; use Devices.get() or Devices.CPU",
        )
    if kind is Devices.MPS and not torch.backends.mps.is_available():
        raise ConfigError(
            "NNModelParams.device",
            kind,
            "no MPS device is present; use Devices.get() or Devices.CPU",
        )
    return torch.device(kind.value)


def refuse_loss_ref(loss: Any) -> None:
    """A record's custom loss is a name, not code: it must be passed again."""
    if isinstance(loss, CustomLossRef):
        raise ConfigError(
            "NNModelParams.loss",
            loss.name,
            "this record was trained with a custom loss, which is not saved as code; pass "
            "the loss again: NNModel.from_checkpoint(ckpt, loss=YourLoss()) or "
            "NNModelParams(loss=YourLoss())",
        )
