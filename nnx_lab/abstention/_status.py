"""A threshold selection's status: nnx-lab's word, equal to NNx's as well.

``select_threshold(...).status`` is ``"selected"`` or ``"no_threshold"`` (the words the
AbstentionExplorer and saved widget states carry); NNx says ``"ok"`` and
``"no_feasible_policy"``. The status compares equal to both, so a script written for NNx
(``selection.status == "ok"``) reads it unchanged; ``.nnx`` is NNx's word. It hashes as
nnx-lab's word, so a set or dict key matches that word only.
"""

from __future__ import annotations

__all__ = ["NNX_STATUS", "SelectionStatus"]

NNX_STATUS = {"selected": "ok", "no_threshold": "no_feasible_policy"}
_OURS = {nnx: ours for ours, nnx in NNX_STATUS.items()}


class SelectionStatus(str):
    """``"selected"`` (NNx: ``"ok"``) or ``"no_threshold"`` (NNx: ``"no_feasible_policy"``);
    built from either word."""

    def __new__(cls, word: str) -> SelectionStatus:
        ours = _OURS.get(word, word)
        if ours not in NNX_STATUS:
            words = ", ".join(repr(w) for pair in NNX_STATUS.items() for w in pair)
            raise ValueError(f"status {word!r} is not a selection status; use one of {words}")
        return super().__new__(cls, ours)

    @property
    def nnx(self) -> str:
        """NNx's word for this status."""
        return NNX_STATUS[str(self)]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return str.__eq__(str(self), str(other)) or str(other) == self.nnx
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__

    def __repr__(self) -> str:
        return repr(str(self))
