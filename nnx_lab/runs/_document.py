"""Saved JSON documents: a file the user names (a calibrator, an abstention policy),
written atomically and read back through its one strict shape.

A document is data: reading one parses JSON and checks it, nothing in it is imported or
called. Each kind of document names its ``format`` and ``version`` and declares its
shape (``runs/_schemas/documents.py``); ``load`` returns the typed value or raises one
``DocumentFileError`` (a ``SchemaError`` and a ``ConfigError``) naming the file, the
field, the value and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..errors import ConfigError
from ._atomic import atomic_write_json
from ._schemas.documents import DocumentFileError
from ._schemas.reading import check_header, check_shape, read_json_file

__all__ = ["DocumentFileError", "DocumentType"]

T = TypeVar("T")


@dataclass(frozen=True)
class DocumentType:
    """One kind of saved document: ``DocumentType("nnx_lab.abstention_policy", 1,
    noun="a policy", redo="select and save again")``; ``redo`` is the fix for a file
    that is not one, or not this version."""

    format: str
    version: int
    noun: str
    redo: str

    @property
    def fix(self) -> str:
        return f"this is not {self.noun} nnx_lab saved, or it was altered; {self.redo}"

    def header(self) -> dict[str, Any]:
        """The keys every document of this kind starts with."""
        return {"format": self.format, "version": self.version}

    def error(
        self, path: str | Path, key: str, value: Any, fix: str | None = None
    ) -> DocumentFileError:
        """A refused field of the file at ``path``."""
        return DocumentFileError(path, key, "refused", value=value, fix=fix or self.fix)

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

    def load(self, path: str | Path, shape: type[T]) -> T:
        """The document at ``path`` as ``shape``, once it is JSON of this format and
        version and every field checks out."""
        return read_json_file(
            path,
            shape,
            DocumentFileError,
            fix=self.fix,
            header=("format", self.format, self.version),
            redo=f"{self.redo} with this version",
            missing_fix="pass the path save() wrote",
        )

    def from_state(self, state: Any, shape: type[T], what: str) -> T:
        """An in-memory document (what ``state()`` / ``to_json()`` gave) as ``shape``,
        checked as strictly as a file; ``what`` names it in a refusal."""
        fix = f"pass what {what.replace('from_state', 'state()')} returned"
        header = ("format", self.format, self.version)
        check_header(state, what, DocumentFileError, header, fix=fix, redo=fix)
        return check_shape(state, shape, what, DocumentFileError, fix=fix)
