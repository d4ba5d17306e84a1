"""The monitor over a real Jupyter kernel's comm (no browser).

* Updates sent from a training thread reach IOPub, coalesced; a ``hello`` gets a
  snapshot.
* Kernel subshells (ipykernel 7): JupyterLab sends widget messages on subshells and
  deletes one after each page load. A training thread has no parent message of its
  own; if it borrowed the last one any shell handled, ipykernel routed the widget's
  next front-end messages to that deleted subshell and dropped them ("Unknown
  subshell_id"): the page never got its history, Stop did nothing. This is
  reproduced here with the kernel's own messages, no browser needed.
* The fallback output a reopened notebook shows, and its update at the run's end.
"""

from __future__ import annotations

import os
import pathlib
import queue
import time

import ipykernel  # noqa: F401  (the kernel the test starts)
import jupyter_client
import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]

SETUP = """
import threading, time
from nnx_lab.engine.events import RunFinished, StepEnded, TrainingControl
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import feed, scripted_run


class SlowModel:
    '''Stands in for NNModel.train: scripted events, a few ms per step, stoppable.'''

    def train(self, params, callbacks=()):
        control = TrainingControl()
        for cb in callbacks:
            cb.on_attach(control)
        try:
            for event in scripted_run(n_epochs=1, steps_per_epoch=1_000_000, log_every=5):
                if isinstance(event, StepEnded):
                    if control.stop_requested:
                        done = RunFinished(
                            run_id="0" * 32, status="stopped", epochs_completed=0,
                            steps=event.step, stop_reason=control.stop_reason,
                        )
                        for cb in callbacks:
                            cb.on_run_finished(done)
                        return "stopped"
                    time.sleep(0.002)
                for cb in callbacks:
                    getattr(cb, event.hook, lambda e: None)(event)
        finally:
            for cb in callbacks:
                cb.on_detach()


monitor = TrainingMonitor()
display(monitor)
"""

TRAIN_IN_THREAD = """
events = scripted_run(run_id="cd" * 16, n_epochs=2, steps_per_epoch=2000, log_every=10)
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


def _drain(kc, until, timeout=30.0):
    """IOPub messages until ``until(msg)`` is true (returns them, the last one matching)."""
    out = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=0.5)
        except queue.Empty:
            continue
        out.append(msg)
        if until(msg):
            return out
    raise AssertionError(f"timed out; last messages: {[m['msg_type'] for m in out[-10:]]}")


def _run(kc, code, timeout=60, subshell=None):
    """Execute code (on a subshell, if given); the IOPub messages it produced until idle."""
    msg = kc.session.msg("execute_request", {"code": code, "silent": False, "store_history": False})
    if subshell is not None:
        msg["header"]["subshell_id"] = subshell
    kc.shell_channel.send(msg)
    msg_id = msg["header"]["msg_id"]
    out = _drain(
        kc,
        lambda m: (
            m["parent_header"].get("msg_id") == msg_id
            and m["msg_type"] == "status"
            and m["content"]["execution_state"] == "idle"
        ),
        timeout,
    )
    reply = kc.get_shell_msg(timeout=timeout)
    assert reply["content"]["status"] == "ok", reply["content"]
    return out


def _control(kc, msg_type, content):
    msg = kc.session.msg(msg_type, content)
    kc.control_channel.send(msg)
    reply = kc.get_control_msg(timeout=30)
    assert reply["content"]["status"] == "ok", reply["content"]
    return reply["content"]


def _comm_id(setup_msgs):
    return next(
        m["content"]["comm_id"]
        for m in setup_msgs
        if m["msg_type"] == "comm_open"
        and m["content"]["data"]["state"].get("_anywidget_id", "").endswith("TrainingMonitor")
    )


def _send_comm(kc, comm_id, content, subshell=None):
    msg = kc.session.msg(
        "comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": content}}
    )
    if subshell is not None:
        msg["header"]["subshell_id"] = subshell
    kc.shell_channel.send(msg)


def _custom(msg, comm_id):
    return (
        msg["msg_type"] == "comm_msg"
        and msg["content"]["comm_id"] == comm_id
        and msg["content"]["data"].get("method") == "custom"
    )


def test_a_training_thread_pushes_coalesced_updates_over_the_comm(kernel):
    comm_id = _comm_id(_run(kernel, SETUP))
    msgs = _run(kernel, TRAIN_IN_THREAD)
    comm = [m for m in msgs if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id]
    custom = [m for m in comm if m["content"]["data"]["method"] == "custom"]
    updates = [m for m in comm if m["content"]["data"]["method"] == "update"]
    assert custom, "no series message reached IOPub from the training thread"
    assert len(comm) < 200, len(comm)  # 4,000 steps, never one message per step
    rows = sum(
        op["count"]
        for m in custom
        for op in m["content"]["data"]["content"]["ops"]
        if op["series"] == "steps"
    )
    assert rows == 4000
    final = {}
    for m in updates:
        final.update(m["content"]["data"]["state"])
    assert final["status"] == "finished"
    assert final["step"] == 4000
    stdout = "".join(m["content"].get("text", "") for m in msgs if m["msg_type"] == "stream")
    assert "status=finished" in stdout

    # a reloaded page says hello and gets everything, addressed to it
    _send_comm(kernel, comm_id, {"kind": "hello", "version": 2, "view": "page-2", "req": 1})
    got = _drain(
        kernel,
        lambda m: (
            _custom(m, comm_id)
            and m["content"]["data"]["content"].get("to") == "page-2"
            and m["content"]["data"]["content"]["part"]
            == m["content"]["data"]["content"]["parts"] - 1
        ),
    )
    snap = [m for m in got if _custom(m, comm_id)]
    ops = [op for m in snap for op in m["content"]["data"]["content"]["ops"]]
    assert sum(op["count"] for op in ops if op["series"] == "steps") == 4000
    assert sum(op["count"] for op in ops if op["series"] == "epochs") == 2


# How the training runs: monitor.fit (our thread), or a thread of the user's own.
STARTS = {
    "fit": "monitor.fit(SlowModel(), None); None",
    "own thread": (
        "threading.Thread(target=SlowModel().train, args=(None, [monitor]), daemon=True).start()"
    ),
}


@pytest.mark.parametrize("start", sorted(STARTS))
def test_front_end_messages_reach_the_widget_after_a_subshell_it_never_used_is_deleted(
    kernel, start
):
    info = kernel.kernel_info(reply=True)["content"]
    assert "kernel subshells" in info.get("supported_features", []), info
    comm_id = _comm_id(_run(kernel, SETUP))
    _run(kernel, STARTS[start])
    _drain(kernel, lambda m: _custom(m, comm_id))  # the training thread sends

    # What a page load does: a request on a fresh subshell, then that subshell is deleted.
    subshell = _control(kernel, "create_subshell_request", {})["subshell_id"]
    _run(kernel, "1 + 1", subshell=subshell)
    _control(kernel, "delete_subshell_request", {"subshell_id": subshell})
    time.sleep(0.3)  # the training thread sends a few more updates meanwhile
    _drain(kernel, lambda m: _custom(m, comm_id))

    # The reloaded page's hello must reach the widget and be answered.
    _send_comm(kernel, comm_id, {"kind": "hello", "version": 2, "view": "after-reload", "req": 1})
    got = _drain(
        kernel,
        lambda m: (
            _custom(m, comm_id) and m["content"]["data"]["content"].get("to") == "after-reload"
        ),
        timeout=15,
    )
    snap = got[-1]["content"]["data"]["content"]
    assert snap["kind"] == "snapshot"
    assert any(op["count"] > 0 for op in snap["ops"] if op["series"] == "steps")

    # And Stop still works.
    _send_comm(kernel, comm_id, {"kind": "stop"})
    _drain(
        kernel,
        lambda m: (
            m["msg_type"] == "comm_msg"
            and m["content"]["comm_id"] == comm_id
            and m["content"]["data"].get("state", {}).get("status") == "stopped"
        ),
        timeout=15,
    )
    # No front-end message was refused for an unknown subshell.
    while True:
        try:
            reply = kernel.get_shell_msg(timeout=0.5)
        except queue.Empty:
            break
        assert reply["content"].get("ename") != "UnknownSubshellError", reply["content"]


def test_the_fallback_output_says_how_to_bring_the_monitor_back(kernel):
    setup = _run(kernel, SETUP)
    displays = [m for m in setup if m["msg_type"] == "display_data"]
    assert len(displays) == 2
    assert "application/vnd.jupyter.widget-view+json" in displays[0]["content"]["data"]
    fallback = displays[1]["content"]
    display_id = fallback["transient"]["display_id"]
    assert display_id.startswith("nnx-monitor-")
    assert "nnx-monitor-snapshot" in fallback["data"]["text/html"]
    msgs = _run(kernel, TRAIN_IN_THREAD)
    updated = [
        m
        for m in msgs
        if m["msg_type"] == "update_display_data"
        and m["content"]["transient"]["display_id"] == display_id
    ]
    assert updated, "the fallback output was not updated"
    last = updated[-1]["content"]["data"]
    run_id = "cd" * 16
    assert f'TrainingMonitor.from_run("{run_id}")' in last["text/html"]
    assert "status=finished" in last["text/plain"]
