"""Front-end message handlers that several widgets answer alike, as mixins (put before
``NNxWidget`` in the bases; ``NNxWidget`` dispatches a message of kind ``k`` to
``_on_k``).

``ExplorerMessages``: the explorers (calibration, abstention): "hello" sends a view its
snapshot; "save" saves, a refusal shown as one line; either way ``revision`` counts
the request as answered. It reads the widget's ``_transport``, ``save``, ``error``,
``show_error`` and ``revision``.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError

__all__ = ["ExplorerMessages"]


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
