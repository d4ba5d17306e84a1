"""The pre-flight's report: one ``PreflightCheck`` per check, in the order run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PreflightCheck", "PreflightReport"]


@dataclass(frozen=True)
class PreflightCheck:
    """``name`` ("data", "gradients", "overfit", "lr"); ``passed``; ``problem`` (None
    when it passed: what is wrong, naming the tensor, the column or the value);
    ``fix`` (what to do); ``details`` (the numbers behind the verdict, JSON-ready)."""

    name: str
    passed: bool
    problem: str | None = None
    fix: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "problem": self.problem,
            "fix": self.fix,
            "details": self.details,
        }


@dataclass(frozen=True)
class PreflightReport:
    checks: tuple[PreflightCheck, ...]
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def problems(self) -> dict[str, str]:
        """Each failed check's problem, by check name."""
        return {c.name: c.problem or "failed" for c in self.checks if not c.passed}

    def __getitem__(self, name: str) -> PreflightCheck:
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(f"no check {name!r}; the report has {[c.name for c in self.checks]}")

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "seconds": self.seconds,
            "checks": [c.to_json() for c in self.checks],
        }

    def __str__(self) -> str:
        lines = [f"pre-flight: {'pass' if self.passed else 'PROBLEMS'} ({self.seconds:.1f} s)"]
        for c in self.checks:
            mark = "ok  " if c.passed else "FAIL"
            text = "" if c.passed else f": {c.problem}" + (f" — {c.fix}" if c.fix else "")
            lines.append(f"  {mark} {c.name}{text}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        rows = "".join(
            f"<tr><td>{'✓' if c.passed else '✗'}</td><td>{html.escape(c.name)}</td>"
            f"<td>{html.escape(c.problem or 'pass')}</td><td>{html.escape(c.fix or '')}</td></tr>"
            for c in self.checks
        )
        return f"<table><tr><th></th><th>check</th><th>result</th><th>fix</th></tr>{rows}</table>"
