"""AbstentionExplorer: a threshold slider on the risk-coverage curve, calibrated and
uncalibrated probabilities side by side, and the rows a threshold declines."""

from __future__ import annotations

import pathlib
import threading
from typing import Any

import numpy as np
import traitlets as t

from ..abstention import (
    AbstentionPolicy,
    RiskCoverageCurve,
    ThresholdSelection,
    check_kind,
    distribution,
    targets,
    unique_ids,
)
from ..errors import ConfigError
from ._abstention_sides import (
    CALIBRATED,
    CEILING_FIX,
    THRESHOLD_FIX,
    UNCALIBRATED,
    check_guarantee,
    check_unit,
    declined_row,
    side_of,
)
from ._base import NNxWidget
from ._page_messages import ExplorerMessages
from ._tables import Table
from ._transport import SeriesTransport

__all__ = ["AbstentionExplorer"]


class AbstentionExplorer(ExplorerMessages, NNxWidget):
    """The risk-coverage curve of a classifier's confidence, a threshold slider with
    its operating point, coverage / risk / accepted / abstained, the most confident
    mistakes and the rows the threshold declines; Save writes the policy (JSON).

    ``AbstentionExplorer(probabilities, y)`` takes an ``(N, C)`` array, a
    ``model.predict_proba(...)`` result or a ``CalibratedPrediction``
    (``calibrator.transform(...)``): then calibrated and uncalibrated probabilities are
    shown side by side, and ``use`` says which the threshold (and the saved policy)
    applies to. ``y`` are the validation split's targets.

    A risk ceiling chooses the threshold with ``nnx_lab.abstention.select_threshold``
    (the most coverage whose validation risk is at most the ceiling; with
    ``guarantee=0.95``, selection with guaranteed risk). The slider then moves it by
    hand. State lives in traitlets: ``explorer.threshold = 0.9``,
    ``explorer.risk_ceiling = 0.02``, ``explorer.use = "uncalibrated"``,
    ``explorer.save("policy.json")``; ``explorer.readouts`` holds the figures.
    """

    _bundle_name = "abstention"
    # What the page may set: the threshold, the risk box, the guarantee, which
    # probabilities, the policy's path, the page of declined rows. The kernel owns the rest.
    _page_traits = NNxWidget._page_traits | {
        "threshold",
        "risk_ceiling",
        "guarantee",
        "use",
        "path",
        "abstained_start",
    }

    threshold = t.Float(0.5, help="Rows scoring at or above it are answered.").tag(sync=True)
    risk_ceiling = t.Float(0.05, help="Chooses the threshold (select_threshold).").tag(sync=True)
    guarantee = t.Float(None, allow_none=True, help="Confidence level of a risk bound.").tag(
        sync=True
    )
    use = t.Unicode(UNCALIBRATED, help="Which probabilities the threshold applies to.").tag(
        sync=True
    )
    selection = t.Dict(help="What the risk ceiling chose (or why nothing).").tag(sync=True)
    readouts = t.Dict(help="Coverage, risk, accepted, abstained per side.").tag(sync=True)
    mistakes = t.List(help="The most confident mistakes (of `use`).").tag(sync=True)
    abstained_rows = t.List(help="One page of the declined rows, nearest first.").tag(sync=True)
    abstained_start = t.Int(0, help="First declined row of the page shown.").tag(sync=True)
    path = t.Unicode("policy.json", help="Where Save writes the policy.").tag(sync=True)
    saved = t.Unicode("", help="What the last Save wrote.").tag(sync=True)
    revision = t.Int(0, help="Counts the requests the kernel answered.").tag(sync=True)
    info = t.Dict(help="Rows, classes, labels, ids, sides (fixed).").tag(sync=True)

    def __init__(
        self,
        probabilities: Any,
        y: Any,
        *,
        kind: str = "max_probability",
        labels: Any = None,
        sample_ids: Any = None,
        model_id: str | None = None,
        split_id: str = "validation",
        test_split_id: str | None = None,
        risk_ceiling: float = 0.05,
        guarantee: float | None = None,
        threshold: float | None = None,
        use: str | None = None,
        top_k: int = 10,
        page_size: int = 10,
        path: str = "policy.json",
        update_interval: float = 0.02,
    ) -> None:
        kind = check_kind(kind)
        risk_ceiling = check_unit(risk_ceiling, "risk_ceiling", CEILING_FIX)
        guarantee = check_guarantee(guarantee)
        if threshold is not None:
            threshold = check_unit(threshold, "threshold", THRESHOLD_FIX)
        for name, value, least in (("top_k", top_k, 0), ("page_size", page_size, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= 1000:
                raise ConfigError(name, value, f"pass a number of rows in [{least}, 1000]")
        for name, value, optional in (
            ("split_id", split_id, False),
            ("test_split_id", test_split_id, True),
            ("model_id", model_id, True),
        ):
            if (value is None and not optional) or (
                value is not None and (not isinstance(value, str) or not value.strip())
            ):
                raise ConfigError(name, value, "pass a non-empty string")
        if test_split_id == split_id:
            raise ConfigError(
                "test_split_id",
                test_split_id,
                f"it equals split_id={split_id!r}; test the policy on another split",
            )
        if not isinstance(path, str) or not path.strip():
            raise ConfigError("path", path, "name the JSON file Save writes (e.g. 'policy.json')")
        if not 0.005 <= update_interval <= 10:
            raise ConfigError("update_interval", update_interval, "pass seconds in [0.005, 10]")

        if hasattr(probabilities, "calibrated_probabilities"):
            sources = {CALIBRATED: probabilities, UNCALIBRATED: probabilities.raw}
        else:
            sources = {UNCALIBRATED: probabilities}
        first = distribution(next(iter(sources.values())), labels)
        ids = unique_ids(sample_ids, first)
        self._sides = {
            name: side_of(src, y, kind, labels, ids, top_k) for name, src in sources.items()
        }
        if use is None:
            use = next(iter(self._sides))
        if use not in self._sides:
            raise ConfigError("use", use, f"pick one of {list(self._sides)}")
        n_rows, n_classes = first.probabilities.shape
        self._y = targets(y, n_rows, n_classes)
        self._ids = ids
        self._labels = first.labels
        self._kind = kind
        self._split = {"split_id": split_id, "test_split_id": test_split_id, "model_id": model_id}
        self._page_size = page_size
        self._lock = threading.RLock()
        self._selection: ThresholdSelection | None = None
        self._selected_for: tuple[Any, ...] | None = None
        self._curve = Table(
            [("coverage", "float64")] + [(f"risk.{name}", "float64") for name in self._sides]
        )
        self._stop_table = Table(
            [
                ("threshold", "float64"),
                ("coverage", "float64"),
                ("risk", "float64"),
                ("accepted", "int32"),
                ("errors", "int32"),
            ]
        )
        calibrated = self._sides.get(CALIBRATED)
        super().__init__(
            risk_ceiling=risk_ceiling,
            guarantee=guarantee,
            use=use,
            path=path,
            info={
                "rows": int(n_rows),
                "classes": int(n_classes),
                "kind": kind,
                "labels": None if self._labels is None else [str(v) for v in self._labels],
                "sides": list(self._sides),
                "temperature": None if calibrated is None else calibrated.temperature,
                "page_size": page_size,
                "top_k": top_k,
                "aurc": {name: s.curve.aurc for name, s in self._sides.items()},
                **self._split,
            },
        )
        self._transport = SeriesTransport(
            self.send,
            {"curve": self._curve, "stops": self._stop_table},
            self._lock,
            interval=update_interval,
        )
        self._set_curve()
        self._set_stops()
        for table in (self._curve, self._stop_table):
            table.take_changes()  # no view yet: each view gets them in its snapshot
        self._quiet = False
        if threshold is None:
            self._select(initial=True)
        else:
            self._select(move=False)
            self.threshold = threshold
        self._refresh()
        self.observe(self._on_threshold, names="threshold")
        self.observe(self._on_choice, names=["risk_ceiling", "guarantee", "use"])
        self.observe(self._on_page, names="abstained_start")

    # ------------------------------------------------------------------ traits

    @t.validate("threshold")
    def _valid_threshold(self, proposal: Any) -> float:
        return self._trait_check(check_unit, proposal["value"], "threshold", THRESHOLD_FIX)

    @t.validate("risk_ceiling")
    def _valid_ceiling(self, proposal: Any) -> float:
        return self._trait_check(check_unit, proposal["value"], "risk_ceiling", CEILING_FIX)

    @t.validate("guarantee")
    def _valid_guarantee(self, proposal: Any) -> float | None:
        return self._trait_check(check_guarantee, proposal["value"])

    @t.validate("use")
    def _valid_use(self, proposal: Any) -> str:
        value = proposal["value"]
        sides = list(getattr(self, "_sides", {})) or [value]
        if value not in sides:
            raise t.TraitError(f"use={value!r} is invalid: pick one of {sides}")
        return value

    @t.validate("abstained_start")
    def _valid_start(self, proposal: Any) -> int:
        value = proposal["value"]
        if value < 0:
            raise t.TraitError(f"abstained_start={value!r} is invalid: pass a row index >= 0")
        return value

    @t.validate("path")
    def _valid_path(self, proposal: Any) -> str:
        value = proposal["value"]
        if not value.strip():
            raise t.TraitError(f"path={value!r} is invalid: name the JSON file Save writes")
        return value

    @staticmethod
    def _trait_check(check: Any, *args: Any) -> Any:
        try:
            return check(*args)
        except ConfigError as exc:
            raise t.TraitError(str(exc)) from None

    def set_state(self, sync_data: dict[str, Any]) -> None:
        try:
            super().set_state(sync_data)  # a refused value is shown and sent back
        finally:
            self.revision += 1  # answered: the view may send its next value

    def _on_threshold(self, _change: Any) -> None:
        if self._quiet:
            return
        self._quiet = True
        try:
            self.abstained_start = 0  # a new threshold shows the rows nearest to it
        finally:
            self._quiet = False
        self._refresh()

    def _on_choice(self, change: Any) -> None:
        if change["name"] == "use":
            self._set_stops()
            self._set_curve()
        self._select()

    def _on_page(self, _change: Any) -> None:
        if not self._quiet:
            self._refresh()

    # ------------------------------------------------------------------ computing

    def _set_curve(self) -> None:
        """The curves to draw: each side's slider stops (exact points), on one x grid."""
        xs = {n: s.curve.coverage[s.stops] for n, s in self._sides.items()}
        grid = np.unique(np.concatenate(list(xs.values())))
        columns: dict[str, Any] = {"coverage": grid}
        for name, side in self._sides.items():
            risk = side.curve.risk[side.stops]
            columns[f"risk.{name}"] = np.interp(grid, xs[name], risk, left=np.nan, right=np.nan)
        self._curve.set(columns)

    def _set_stops(self) -> None:
        side = self._sides[self.use]
        c, idx = side.curve, side.stops[::-1]  # ascending threshold
        self._stop_table.set(
            {
                "threshold": c.thresholds[idx],
                "coverage": c.coverage[idx],
                "risk": c.risk[idx],
                "accepted": c.accepted[idx],
                "errors": c.errors[idx],
            }
        )

    def select(self) -> ThresholdSelection:
        """Choose the threshold again for the current ceiling, guarantee and side (what
        changing any of them does); returns ``select_threshold``'s selection."""
        self._select()
        assert self._selection is not None
        return self._selection

    def _select(self, *, initial: bool = False, move: bool = True) -> None:
        """Choose the threshold for the ceiling (and guarantee) on the ``use`` side."""
        from ..abstention import select_threshold

        with self._lock:
            side = self._sides[self.use]
            selection = select_threshold(
                side.source,
                self._y,
                kind=self._kind,
                risk_ceiling=self.risk_ceiling,
                guarantee=self.guarantee,
                labels=self._labels,
                **self._split,
            )
            self._selection = selection
            self._selected_for = (self.use, self.risk_ceiling, self.guarantee)
            self.selection = {
                "status": selection.status,
                "reason": selection.reason,
                "use": self.use,
                "risk_ceiling": selection.risk_ceiling,
                "guarantee": selection.guarantee,
                "threshold": selection.threshold,
                "coverage": selection.coverage,
                "risk": selection.risk,
                "risk_bound": selection.risk_bound,
                "note": selection.require().note if selection.ok else None,
            }
            if not move:
                return
            if selection.ok:
                target = float(selection.threshold)  # type: ignore[arg-type]
            elif initial:
                target = float(side.curve.thresholds[-1])  # answer every row
            else:
                target = self.threshold  # nothing meets the ceiling: stay, say why
            if target == self.threshold:
                self._refresh()
            else:
                self.threshold = target

    def _refresh(self) -> None:
        """Readouts for every side and the page of declined rows, sent to the views."""
        with self._lock:
            tau = self.threshold
            readouts = {name: side.at(tau) for name, side in self._sides.items()}
            side = self._sides[self.use]
            use = readouts[self.use]
            abstained = use["abstained"]
            start = min(self.abstained_start, max(0, abstained - 1))
            start -= start % self._page_size
            rows = side.order[use["accepted"] + start : use["accepted"] + start + self._page_size]
            page = [declined_row(side, int(i), self._y, self._ids, self._labels) for i in rows]
            self._quiet = True
            try:
                with self.hold_sync():
                    self.abstained_start = start
                    self.readouts = readouts
                    self.abstained_rows = page
                    self.mistakes = [{**m, "accepted": m["score"] >= tau} for m in side.mistakes]
                    self.error = ""
            finally:
                self._quiet = False
            self._transport.request_flush()

    # ------------------------------------------------------------------ messages
    # hello and save: ExplorerMessages (_page_messages.py)

    # ------------------------------------------------------------------ the policy

    def policy(self) -> AbstentionPolicy:
        """The policy at the current threshold, for the ``use`` probabilities.

        The threshold the risk ceiling chose gives ``select_threshold``'s own policy
        (with its guarantee, if one was asked for). A threshold moved by hand gives a
        policy whose validation risk must still be within the ceiling (no guarantee:
        the bound held for the chosen threshold only). Refused when nothing is
        answered, or the validation risk is above the ceiling.
        """
        with self._lock:
            sel = self._selection
            chosen = (
                sel is not None
                and sel.ok
                and self._selected_for == (self.use, self.risk_ceiling, self.guarantee)
                and sel.threshold == self.threshold
            )
            if chosen:
                return sel.require()  # type: ignore[union-attr]
            side = self._sides[self.use]
            r = side.at(self.threshold)
            if r["risk"] is None:
                raise ConfigError(
                    "threshold",
                    self.threshold,
                    "it answers no row: lower the threshold before saving a policy",
                )
            if r["risk"] > self.risk_ceiling:
                raise ConfigError(
                    "threshold",
                    self.threshold,
                    f"its validation risk {r['risk']:.4g} is above the risk ceiling "
                    f"{self.risk_ceiling:g}: raise the threshold (or the ceiling) before saving",
                )
            return AbstentionPolicy(
                kind=self._kind,
                threshold=self.threshold,
                risk_ceiling=self.risk_ceiling,
                n_classes=int(side.probabilities.shape[1]),
                labels=self._labels,
                model_id=self._split["model_id"],
                split_id=self._split["split_id"],  # type: ignore[arg-type]
                test_split_id=self._split["test_split_id"],
                calibrated=side.calibrated,
                temperature=side.temperature,
                validation={
                    "coverage": r["coverage"],
                    "risk": r["risk"],
                    "accepted": r["accepted"],
                    "errors": r["errors"],
                    "total": side.curve.total,
                },
            )

    def save(self, path: str | pathlib.Path | None = None) -> pathlib.Path:
        """Write ``policy()`` as JSON to ``path`` (default: the ``path`` trait, which the
        widget's box edits), atomically; a path given here becomes the ``path`` trait."""
        with self._lock:
            if path is not None:
                self.path = str(path)
            policy = self.policy()
            written = policy.save(self.path)
            kind = "guaranteed" if policy.guarantee is not None else "validation"
            self.saved = (
                f"saved threshold {policy.threshold:.6g} ({self.use}, {kind} risk "
                f"{policy.validation['risk']:.4g} <= {policy.risk_ceiling:g}) to {written}"
            )
            return written

    # ------------------------------------------------------------------ reading

    def curve(self, side: str | None = None) -> RiskCoverageCurve:
        """The full risk-coverage curve of ``side`` (default: ``use``)."""
        return self._sides[side or self.use].curve

    @property
    def transport_stats(self) -> Any:
        return self._transport.stats

    def summary(self) -> str:
        r = self.readouts.get(self.use, {})
        risk = r.get("risk")
        parts = [
            f"{self.info['rows']:,} rows",
            f"threshold {self.threshold:.4g} on {self.use} {self._kind}",
            f"coverage {r.get('coverage', 0):.4f}",
            "risk n/a (nothing answered)" if risk is None else f"risk {risk:.4f}",
            f"ceiling {self.risk_ceiling:g}",
        ]
        return ", ".join(parts)

    def close(self) -> None:
        transport = getattr(self, "_transport", None)
        if transport is not None:
            transport.close()
        super().close()
