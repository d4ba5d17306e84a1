"""``CharTokenizer``: one id per character, a vocabulary saved as JSON.

A character tokenizer ships with the package (no download, no merges to learn) and
suits the generated corpus, whose alphabet is a few dozen characters. Special tokens
come first: ``<pad>`` is id 0 and ``<eos>`` id 1, so a padded batch and a stream of
sentences read the same for every vocabulary. The saved file is data: loading it
reads a list of strings, never code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DataError, FileError
from ..runs import atomic_write_json

__all__ = ["CharTokenizer"]

_FORMAT = "nnx_lab.char_tokenizer"
_VERSION = 1
SPECIALS = ("<pad>", "<eos>")


class CharTokenizer:
    """``encode(text) -> list[int]``, ``decode(ids) -> str`` over ``chars`` (each one
    character, no repeats), after the special tokens ``<pad>`` (0) and ``<eos>`` (1)."""

    def __init__(self, chars: Sequence[str]) -> None:
        chars = list(chars)
        bad = [c for c in chars if not isinstance(c, str) or len(c) != 1]
        if bad:
            raise ConfigError("CharTokenizer.chars", bad[0], "single characters only")
        if len(set(chars)) != len(chars):
            twice = next(c for c in chars if chars.count(c) > 1)
            raise ConfigError("CharTokenizer.chars", twice, "list each character once")
        self.chars = tuple(chars)
        self.tokens = SPECIALS + self.chars
        self._ids = {c: i + len(SPECIALS) for i, c in enumerate(self.chars)}

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> CharTokenizer:
        """The characters of ``texts``, sorted (the same texts give the same ids)."""
        seen: set[str] = set()
        for text in texts:
            seen.update(text)
        return cls(sorted(seen))

    pad_id = 0
    eos_id = 1

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharTokenizer) and other.chars == self.chars

    def __hash__(self) -> int:
        return hash(self.chars)

    def encode(self, text: str, *, eos: bool = False) -> list[int]:
        """Token ids of ``text`` (``eos=True`` appends ``<eos>``); an unknown character
        is refused, naming it and where it stands."""
        if not isinstance(text, str):
            raise DataError("CharTokenizer.encode(text)", f"a {type(text).__name__}", "pass a str")
        try:
            ids = [self._ids[c] for c in text]
        except KeyError as missing:
            char = missing.args[0]
            raise DataError(
                "CharTokenizer.encode(text)",
                f"character {char!r} at position {text.index(char)} is not in the vocabulary",
                "build the tokenizer from texts that hold it (CharTokenizer.from_texts)",
            ) from None
        return [*ids, self.eos_id] if eos else ids

    def decode(self, ids: Iterable[Any], *, specials: bool = False) -> str:
        """The text of ``ids`` (a list or a 1-D tensor); special tokens are dropped unless
        ``specials=True``."""
        if getattr(ids, "ndim", 1) != 1:
            raise DataError(
                "CharTokenizer.decode(ids)",
                f"ids of shape {tuple(ids.shape)}",  # type: ignore[attr-defined]
                "decode one sequence at a time (a row of the batch)",
            )
        out = []
        for raw in ids:
            i = int(raw)
            if not 0 <= i < self.vocab_size:
                raise DataError(
                    "CharTokenizer.decode(ids)",
                    f"token id {i} is outside the vocabulary [0, {self.vocab_size})",
                    "decode ids of this tokenizer's model",
                )
            if i >= len(SPECIALS) or specials:
                out.append(self.tokens[i])
        return "".join(out)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "specials": list(SPECIALS),
            "chars": list(self.chars),
        }

    def save(self, path: str | Path) -> Path:
        """Write the vocabulary as JSON (atomically) and return the path."""
        path = Path(path)
        atomic_write_json(path, self.to_json())
        return path

    @classmethod
    def load(cls, path: str | Path) -> CharTokenizer:
        """Read a vocabulary ``save`` wrote; anything else is refused with the reason."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise FileError(path, f"not a JSON vocabulary ({error})") from None
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise FileError(
                path, f"not a {_FORMAT} file", fix="pass a file CharTokenizer.save wrote"
            )
        if data.get("version") != _VERSION:
            raise FileError(
                path,
                f"version {data.get('version')!r}, this nnx-lab reads {_VERSION}",
                fix="save it again with this version",
            )
        if data.get("specials") != list(SPECIALS) or not isinstance(data.get("chars"), list):
            raise FileError(path, "its specials or chars are not what save writes")
        try:
            return cls(data["chars"])
        except ConfigError as error:
            raise FileError(path, f"its chars are refused: {error}") from None
