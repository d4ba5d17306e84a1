"""SIGTERM on a rank: torchrun ending the job (another rank failed, the launcher
stopped it, the process that launched it is gone).

The default action would kill the rank wherever it is, rank 0 perhaps in the middle of
writing its run's end. Instead, while a run trains (the loop's control is attached, by
``DDP.attach_control``), the run ends after its current step as "failed"
("terminated") with its records written; while a rank records a failure, nothing
interrupts it; otherwise the rank exits (``Terminated``, a ``SystemExit`` of 143).

A Python handler runs only when the main thread is back in the interpreter: stuck in
a C call (a collective whose peer is alive but stuck too), it never would. The C-level
handler writes the signal's number to a wakeup socket at once; a thread reads it there
and ends the process ``GRACE_S`` later if it is still alive (torchrun itself sends
SIGKILL after 30 s; a rank whose torchrun is gone has nobody to do so).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from typing import Any

__all__ = ["GRACE_S", "Terminated", "install", "set_control", "set_failing"]

GRACE_S = 20.0

_control: Any = None  # the training loop's control while a run trains
_failing = False  # this rank records a failure: let it finish
_installed = False


class Terminated(SystemExit):
    """SIGTERM reached this rank (the job is being torn down)."""


def terminated() -> Terminated:
    return Terminated(
        "terminated (SIGTERM): the job is being ended (another rank failed, the launcher "
        "stopped it, or the process that launched it is gone)"
    )


def set_control(control: Any) -> None:
    """The control of the run that trains now (None: none trains)."""
    global _control
    _control = control


def set_failing() -> None:
    """This rank is recording a failure: a SIGTERM no longer interrupts it."""
    global _failing
    _failing = True


def _on_sigterm(signum: int, frame: Any) -> None:
    if _failing:
        return  # the grace thread still ends the process in GRACE_S
    control = _control
    if control is not None:  # the loop ends after this step, with its records written
        control.fail(terminated())
        return
    raise terminated()


def _grace_thread() -> None:
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    if previous != -1:  # an event loop's: keep it, and go without the grace thread
        signal.set_wakeup_fd(previous)
        reader.close()
        writer.close()
        return

    def watch() -> None:
        while True:
            if signal.SIGTERM in reader.recv(64):
                time.sleep(GRACE_S)
                os._exit(143)

    threading.Thread(target=watch, name="nnx-sigterm-grace", daemon=True).start()


def install(force: bool = False) -> bool:
    """Handle SIGTERM as above, from the main thread; unless ``force``, only where
    SIGTERM still has its default action (a script's own handler is kept)."""
    global _installed
    if _installed:
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    if not force and signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    signal.signal(signal.SIGTERM, _on_sigterm)
    _grace_thread()
    _installed = True
    return True
