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
    plan: Any,
    nproc_per_node: int = 2,
    *,
    nnodes: int = 1,
    node_rank: int = 0,
    rdzv_endpoint: str | None = None,
    rdzv_id: str | None = None,
    master_port: int | None = None,
    monitor: bool = True,
    env: dict[str, str] | None = None,
) -> LaunchHandle:
    """Train ``plan`` (an ``ExperimentPlan``) with ``nproc_per_node`` processes per node
    and return its ``LaunchHandle`` at once (``nnx_lab.distributed.launch``: every
    argument but ``monitor`` is passed on; everything it refuses is refused before a
    process starts). ``monitor=True`` gives ``handle.monitor``, a ``TrainingMonitor``
    that follows the run and whose Stop stops every process; ``monitor=False`` gives a
    handle with none (``handle.attach(sink)`` follows the run into any sink)."""
    from ..distributed import launch as start  # torch and torchrun only when called

    handle = start(
        plan,
        nproc_per_node,
        nnodes=nnodes,
        node_rank=node_rank,
        rdzv_endpoint=rdzv_endpoint,
        rdzv_id=rdzv_id,
        master_port=master_port,
        env=env,
    )
    if monitor:
        TrainingMonitor.for_launch(handle)
    return handle
