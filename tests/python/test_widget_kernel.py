"""The monitor over a real Jupyter kernel's comm (no browser): messages sent from a
training thread reach IOPub, coalesced, and a ``hello`` gets the whole history."""

from __future__ import annotations

import os
import pathlib
import queue
import time

import ipykernel  # noqa: F401  (the kernel the test starts)
import jupyter_client
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

SETUP = """
import threading
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import feed, scripted_run
monitor = TrainingMonitor()
display(monitor)
"""

TRAIN_IN_THREAD = """
events = scripted_run(run_id="kernel-run", n_epochs=2, steps_per_epoch=2000, log_every=10)
worker = threading.Thread(target=feed, args=(monitor, events))
worker.start()
worker.join()
print(repr(monitor))
"""


@pytest.fixture
def kernel():
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    km = jupyter_client.KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(REPO), env=env)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    yield kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def _run(kc, code, timeout=60):
    """Execute code; return the IOPub messages it produced until idle."""
    msg_id = kc.execute(code)
    out = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        out.append(msg)
        if (
            msg["parent_header"].get("msg_id") == msg_id
            and msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
        ):
            break
    reply = kc.get_shell_msg(timeout=timeout)
    assert reply["content"]["status"] == "ok", reply["content"]
    return out


def _comm_msgs(msgs, comm_id):
    return [m for m in msgs if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id]


def test_a_training_thread_pushes_coalesced_updates_over_the_comm(kernel):
    setup = _run(kernel, SETUP)
    opens = [m for m in setup if m["msg_type"] == "comm_open"]
    comm_id = next(
        m["content"]["comm_id"]
        for m in opens
        if m["content"]["data"]["state"].get("_anywidget_id", "").endswith("TrainingMonitor")
    )
    msgs = _run(kernel, TRAIN_IN_THREAD)
    comm = _comm_msgs(msgs, comm_id)
    custom = [m for m in comm if m["content"]["data"]["method"] == "custom"]
    updates = [m for m in comm if m["content"]["data"]["method"] == "update"]
    assert custom, "no series message reached IOPub from the training thread"
    assert len(comm) < 200, len(comm)  # 4,000 steps, never one message per step
    points = sum(m["content"]["data"]["content"]["count"] for m in custom)
    assert points == 4000
    assert all(len(m["buffers"]) == 3 for m in custom if m["content"]["data"]["content"]["count"])
    final = {}
    for m in updates:
        final.update(m["content"]["data"]["state"])
    assert final["status"] == "finished"
    assert final["step"] == 4000
    stdout = "".join(m["content"].get("text", "") for m in msgs if m["msg_type"] == "stream")
    assert "status=finished" in stdout

    # a reloaded page says hello and gets everything back in one reset
    hello = {"method": "custom", "content": {"kind": "hello", "version": 1}}
    kernel.shell_channel.send(kernel.session.msg("comm_msg", {"comm_id": comm_id, "data": hello}))
    deadline = time.monotonic() + 30
    reset = None
    while reset is None and time.monotonic() < deadline:
        try:
            msg = kernel.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        if msg["msg_type"] == "comm_msg" and msg["content"]["data"].get("method") == "custom":
            reset = msg
    assert reset is not None, "no reply to hello"
    content = reset["content"]["data"]["content"]
    assert (content["kind"], content["start"], content["count"]) == ("reset", 0, 4000)
    assert len(content["epochs"]) == 2
    assert [len(b) for b in reset["buffers"]] == [16000, 16000, 16000]
