"""What ``ExperimentPlan.validate()`` returns: every problem at once, one per field.

A ``Problem`` names the field (a plan path such as ``train.optim.max_lr``), the value
that was refused and the fix. ``Problems`` is the tuple of them, in the order the plan's
fields are declared; ``raise_for_errors()`` turns a non-empty one into a ``PlanError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

__all__ = ["PlanError", "Problem", "Problems"]


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def json_safe(value: Any) -> Any:
    """A JSON form of a refused value, for widgets and logs (repr where there is none)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        try:
            return to_json()
        except Exception:  # a value refused for being malformed may not serialize either
            pass
    text = getattr(value, "value", None)  # an enum member
    if isinstance(text, str):
        return text
    return repr(value)


@dataclass(frozen=True)
class Problem:
    """One refused field: ``field`` (its plan path), the ``value`` and the ``fix``."""

    field: str
    value: Any
    fix: str

    def __str__(self) -> str:
        return f"{self.field}={_show(self.value)}: {self.fix}"

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "value": json_safe(self.value), "fix": self.fix}


class Problems(tuple[Problem, ...]):
    """Every problem of a plan, one per field; empty when the plan can be fitted."""

    def __new__(cls, problems: Iterable[Problem] = ()) -> Problems:
        seen: dict[str, Problem] = {}
        for p in problems:
            seen.setdefault(p.field, p)  # the first word on a field is the one to fix first
        return super().__new__(cls, seen.values())

    @property
    def ok(self) -> bool:
        return not self

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(p.field for p in self)

    def get(self, field: str) -> Problem | None:
        """The problem of ``field``, or None."""
        return next((p for p in self if p.field == field), None)

    def raise_for_errors(self) -> Problems:
        """Raise a ``PlanError`` listing every problem; return ``self`` when there is none."""
        if self:
            raise PlanError(self)
        return self

    def to_json(self) -> list[dict[str, Any]]:
        return [p.to_json() for p in self]

    def __str__(self) -> str:
        if not self:
            return "no problems"
        lines = [f"{len(self)} problem{'s' if len(self) > 1 else ''}:"]
        lines += [f"  {p}" for p in self]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Problems({list(self)!r})"


class PlanError(ConfigError, TypeError):
    """A plan was refused; ``problems`` lists every field to fix (``field``, ``value`` and
    ``fix`` are the first one's, as for any ``ConfigError``)."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = Problems(problems)
        first = self.problems[0]
        self.field, self.value, self.fix = first.field, first.value, first.fix
        ValueError.__init__(self, "the plan was refused; " + str(self.problems))
