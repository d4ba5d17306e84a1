"""Issue 29: ``nnx_lab.distributed`` takes NNx's argument names beside its own."""

from __future__ import annotations

import pytest

from nnx_lab import distributed


def test_init_process_group_takes_timeout_seconds(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RuntimeError, match="not set; start this script with torchrun"):
        distributed.init_process_group(timeout_seconds=120.0)
    with pytest.raises(ValueError, match="differ"):
        distributed.init_process_group(timeout_s=10.0, timeout_seconds=120.0)
    with pytest.raises(ValueError, match="timeout_seconds=0"):
        distributed.init_process_group(timeout_seconds=0)


def test_shutdown_takes_timeout_seconds_and_is_a_no_op_without_a_group():
    assert distributed.shutdown(timeout_seconds=60.0) is None
    with pytest.raises(ValueError, match="timeout_seconds=-1"):
        distributed.shutdown(timeout_seconds=-1)
