"""The bounds of a plan's numeric fields: what any run accepts, and what the PlanBuilder's
form accepts.

Two kinds of bound, kept apart on purpose:

- **Any run** (``low`` .. ``high``): the range NNx's params check (a learning rate > 0,
  a dropout in [0, 1)), plus one upper end the plan adds where the params have none:
  the counts (dims, widths, epochs, steps, patience) stop at ``SAFE_INT`` = 2**53 - 1.
  A larger count is no run's (2**53 optimizer steps at a billion a second take 104
  days; a layer 2**53 wide holds 36 PB of float32) and is not even the same number
  once it reaches the browser: JavaScript reads every JSON number as a double, so the
  form, the monitor and the runs panel would show another value than the one that
  trains. ``plan.check`` and ``plan.validate()`` refuse it, whatever wrote the plan (a
  form, code, a plan JSON file). ``train.seed`` keeps NNx's own end (< 2**63).
- **This form** (``form_high``, ``form_items``): limits of the PlanBuilder, not of NNx.
  The form is for notebook-sized experiments and builds the network to preview the
  run id; a typo there (``30000000`` for ``300``) should be refused before anything is
  allocated. Code and plan files may go past them (``builder.plan =
  plan.with_value(path, value)``); only what is typed into the form is refused.

Each bound is written once, here, and read by the form (``PlanField.bound``), the
refusals (which name the bound) and the docs (``docs/plan_widgets.md``).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

from ..engine.params_base import FLOAT32_MAX, SEED_LIMIT

__all__ = ["BOUNDS", "SAFE_INT", "Bound"]

SAFE_INT = 2**53 - 1  # JavaScript's Number.MAX_SAFE_INTEGER


def _number(x: float) -> str:
    if x == SAFE_INT:
        return "2**53 - 1"
    if x == SEED_LIMIT:
        return "2**63"
    if x == FLOAT32_MAX:
        return "3.4e38"
    if float(x).is_integer() and abs(x) < 1e16:
        return f"{int(x):,}"
    return f"{x:g}"


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class Bound:
    """The values a numeric field takes (each width's, for ``net.hidden_dims``).

    ``low`` / ``high``: the range any run accepts (``*_open``: that end itself is
    refused; None: no end). ``plan_high``: the plan itself refuses above ``high``
    (NNx's params set no upper end there). ``form_high``: the largest value the
    PlanBuilder's form takes, ``form_items`` the most items of a list there; both are
    limits of this tool, not of NNx (None: the form takes what any run takes).
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    plan_high: bool = False
    form_high: float | None = None
    form_items: int | None = None

    def text(self) -> str:
        """The range any run accepts, in words: ``1 to 2**53 - 1``, ``> 0``, ``[0, 1)``."""
        low, high = self.low, self.high
        if low is not None and high is not None:
            if self.low_open or self.high_open:
                left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
                return f"{left}{_number(low)}, {_number(high)}{right}"
            return f"{_number(low)} to {_number(high)}"
        if low is not None:
            return f"{'>' if self.low_open else '>='} {_number(low)}"
        if high is not None:
            return f"{'<' if self.high_open else '<='} {_number(high)}"
        return "any number"

    def to_json(self) -> dict[str, Any]:
        return {
            "low": self.low,
            "high": self.high,
            "low_open": self.low_open,
            "high_open": self.high_open,
            "form_high": self.form_high,
            "form_items": self.form_items,
            "text": self.text(),
        }

    def plan_refusal(self, value: Any) -> str | None:
        """The fix, when ``value`` (a number, or a list of them) passes the upper end the
        plan adds to NNx's params; None otherwise (the params check everything else)."""
        if not self.plan_high or self.high is None:
            return None
        items = value if isinstance(value, list | tuple) else [value]
        big = next((v for v in items if _is_number(v) and v > self.high), None)
        if big is None:
            return None
        each = "each value " if isinstance(value, list | tuple) else ""
        return (
            f"{each}at most {_number(self.high)}: no run counts that far, and a larger "
            "integer is not the same number in the browser (JSON numbers are doubles there)"
        )

    def form_refusal(self, value: Any) -> str | None:
        """What the form says when ``value`` passes this form's limits, or None."""
        if isinstance(value, list | tuple):
            if self.form_items is not None and len(value) > self.form_items:
                return f"at most {self.form_items} items in this form"
            items, each = list(value), "each value "
        else:
            items, each = [value], ""
        if self.form_high is None:
            return None
        big = next((v for v in items if _is_number(v) and v > self.form_high), None)
        if big is None:
            return None
        return f"{each}at most {_number(self.form_high)} in this form"


_COUNT = {"high": SAFE_INT, "plan_high": True}

# Every numeric field of a plan, by path. ``model.task`` and the metrics are not numbers
# of their own (a task's size is the output dim's).
BOUNDS: dict[str, Bound] = {
    "net.input_dim": Bound(low=1, **_COUNT, form_high=1_000_000),
    "net.output_dim": Bound(low=1, **_COUNT, form_high=1_000_000),
    "net.hidden_dims": Bound(low=1, **_COUNT, form_high=65_536, form_items=64),
    "net.dropout_prob": Bound(low=0, high=1, high_open=True),
    "train.optim.max_lr": Bound(low=0, high=FLOAT32_MAX, low_open=True, form_high=100),
    "train.optim.momentum": Bound(low=0, high=1, high_open=True),  # one, or (beta1, beta2)
    "train.optim.weight_decay": Bound(low=0, high=FLOAT32_MAX, form_high=10),
    "train.optim.grad_clip_norm": Bound(low=0, low_open=True, form_high=FLOAT32_MAX),
    "train.scheduler.min_lr": Bound(low=0, form_high=100),
    "train.scheduler.factor": Bound(low=0, high=1, low_open=True, high_open=True),
    "train.scheduler.patience": Bound(low=0, **_COUNT, form_high=100_000),
    "train.scheduler.cooldown": Bound(low=0, **_COUNT, form_high=100_000),
    "train.scheduler.threshold": Bound(low=0, form_high=1),
    "train.n_epochs": Bound(low=1, **_COUNT, form_high=100_000),
    "train.seed": Bound(low=0, high=SEED_LIMIT, high_open=True, form_high=SAFE_INT),
    "train.accumulation_steps": Bound(low=1, **_COUNT, form_high=4_096),
    "train.log_every": Bound(low=1, **_COUNT, form_high=100_000),
    "train.checkpoint_every_s": Bound(low=0, form_high=86_400),
    "early_stopping.patience": Bound(low=1, **_COUNT, form_high=100_000),
    "early_stopping.min_delta": Bound(low=0, form_high=FLOAT32_MAX),
}
