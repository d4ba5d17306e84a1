"""Front-end message handlers that several widgets answer alike, as mixins (put before
``NNxWidget`` in the bases; ``NNxWidget`` dispatches a message of kind ``k`` to
``_on_k``).

``ExplorerMessages``: the explorers (calibration, abstention): "hello" sends a view its
snapshot; "save" saves, a refusal shown as one line; either way ``revision`` counts
the request as answered. It reads the widget's ``_transport``, ``save``, ``error``,
``show_error`` and ``revision``.

``RunMessages``: the widgets that follow a run (the monitor, the LR finder): a "hello"
without a view id is refused; "stop" calls ``stop()``. It reads ``_transport`` and
``stop``.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError

__all__ = ["ExplorerMessages", "RunMessages"]


class ExplorerMessages:
    def _on_hello(self, content: dict[str, Any], _buffers: list[Any]) -> None:
        self._transport.snapshot(str(content.get("view", "")), int(content.get("req", 0)))

    def _on_save(self, _content: dict[str, Any], _buffers: list[Any]) -> None:
        try:
            self.save()
            self.error = ""
        except (ConfigError, OSError) as exc:  # a refusal, not a crash: no traceback
            self.show_error(f"{type(exc).__name__}: {exc}")
        finally:
            self.revision += 1


class RunMessages:
    def _on_hello(self, content: dict[str, Any], buffers: list[Any]) -> None:
        """A view was (re)rendered or lost track: send it everything, in chunks."""
        view = content.get("view")
        req = content.get("req", 0)
        if not isinstance(view, str) or not view or not isinstance(req, int):
            raise ValueError(f"a hello without a view id: {content!r}; reload the page")
        self._transport.snapshot(view, req)

    def _on_stop(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self.stop()
