"""``nnx_lab.launch``: the distributed launcher with a ``TrainingMonitor`` attached.

The launcher (``nnx_lab.distributed.launch``) is a source of events and owns no widget;
in a notebook, ``nnx_lab.launch(plan, 2)`` still gives ``handle.monitor``, because this
widget-layer function attaches one (``TrainingMonitor.for_launch``) to the handle it
returns. The launcher and its torch load only when it is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._monitor import TrainingMonitor

if TYPE_CHECKING:
    from ..distributed import LaunchHandle

__all__ = ["launch"]


def launch(
    plan: Any, nproc_per_node: int = 2, *, monitor: bool = True, **options: Any
) -> LaunchHandle:
    """Train ``plan`` (an ``ExperimentPlan``) with ``nproc_per_node`` processes per node
    and return its ``LaunchHandle`` at once: ``nnx_lab.distributed.launch`` with every
    other keyword (``nnodes``, ``node_rank``, ``rdzv_endpoint``, ``rdzv_id``,
    ``master_port``, ``env``) passed on as it is, so the two cannot disagree on them, and
    everything it refuses is refused before a process starts. ``monitor=True`` gives
    ``handle.monitor``, a ``TrainingMonitor`` that follows the run and whose Stop stops
    every process; ``monitor=False`` gives a handle with none (``handle.attach(sink)``
    follows the run into any sink)."""
    from ..distributed import launch as start  # torch and torchrun only when called

    handle = start(plan, nproc_per_node, **options)
    if monitor:
        TrainingMonitor.for_launch(handle)
    return handle
