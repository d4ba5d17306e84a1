"""Data-parallel training on torch.distributed (§3.10).

Under torchrun (or ``nnx_lab.launch``)::

    from nnx_lab import distributed
    distributed.init_process_group()            # env://; gloo on CPU, NCCL with CUDA
    params = NNTrainParams(
        train_loader=distributed.train_loader(train_set, batch_size=32, policy="pad", seed=0),
        val_loader=distributed.validation_loader(val_set, batch_size=64), ...)
    run = model.train(params=params, distributed=distributed.DDP())  # the same run on every rank
    distributed.shutdown()                      # a bounded barrier, then the group is destroyed

A rank that raises ends every rank within seconds: the others end with
``RankFailedError`` ("rank 1 failed: ValueError: ...").

Only torch.distributed and torchrun: nothing home-made for communication or rendezvous.
"""

from ..engine.collective import RankFailedError
from ._ddp import DDP
from ._group import init_process_group, is_initialized, rank, shutdown, world_size
from ._launch import LaunchHandle, launch
from ._loaders import train_loader, validation_loader
from ._writer_only import writer_only

__all__ = [
    "DDP",
    "LaunchHandle",
    "RankFailedError",
    "init_process_group",
    "is_initialized",
    "launch",
    "rank",
    "shutdown",
    "train_loader",
    "validation_loader",
    "world_size",
    "writer_only",
]
