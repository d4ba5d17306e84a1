"""Saved JSON documents: a file the user names (a calibrator, an abstention policy),
written atomically and read back with its format and version checked.

A document is data: reading one parses JSON and checks it, nothing in it is imported or
called. Each kind of document names its ``format`` and ``version``; what a reader does
with the fields is its own (the kind's errors help it say so, with the file and the fix).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ._atomic import atomic_write_json

__all__ = ["DocumentType"]


@dataclass(frozen=True)
class DocumentType:
    """One kind of saved document: ``DocumentType("nnx_lab.abstention_policy", 1,
    noun="a policy", redo="select and save again")``; ``redo`` is the fix for a file
    that is not one, or not this version."""

    format: str
    version: int
    noun: str
    redo: str

    def header(self) -> dict[str, Any]:
        """The keys every document of this kind starts with."""
        return {"format": self.format, "version": self.version}

    def error(self, path: str | Path, key: str, value: Any, fix: str | None = None) -> ConfigError:
        """A refused field of the file at ``path``."""
        return ConfigError(
            f"{path}: {key}",
            value,
            fix or f"this is not {self.noun} nnx_lab saved, or it was altered; {self.redo}",
        )

    def save(self, path: str | Path, document: dict[str, Any]) -> Path:
        """Write ``document`` to ``path`` atomically (the old file or the new one, never
        a partial one); the folder must exist."""
        path = Path(path)
        if path.is_dir():
            raise ConfigError("path", str(path), "name a file, not a folder")
        if not path.parent.is_dir():
            raise ConfigError(
                "path", str(path), f"the folder {path.parent} does not exist; create it first"
            )
        atomic_write_json(path, document)
        return path

    def load(self, path: str | Path) -> dict[str, Any]:
        """The document at ``path``, once it is JSON of this format and version."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError(
                "path", str(path), "no such file; pass the path save() wrote"
            ) from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise self.error(path, "content", f"not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise self.error(path, "content", type(data).__name__)
        if data.get("format") != self.format:
            raise self.error(path, "format", data.get("format"))
        if data.get("version") != self.version:
            raise self.error(
                path,
                "version",
                data.get("version"),
                f"this nnx_lab reads version {self.version}; {self.redo} with this version",
            )
        return data
