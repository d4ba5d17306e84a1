"""The monitor's race lanes: one per run of a race, each with its own step and epoch
series in the shared transport. A mixin of ``TrainingMonitor`` (it reads the monitor's
lock, transport, series capacities and ``runs`` / ``error`` traits)."""

from __future__ import annotations

from ._race import LANE_EPOCHS, LANE_POINTS, RaceLane

__all__ = ["MonitorLanes"]


class MonitorLanes:
    def _new_lane(self, name: str, *, forward: bool) -> RaceLane:
        lane = RaceLane(
            self._lane_host,
            f"lane{next(self._lane_ids)}",
            name,
            points=min(LANE_POINTS, self._steps.capacity),
            epochs=min(LANE_EPOCHS, self._epochs.capacity),
            forward=self if forward else None,
        )
        steps, epochs = lane.series_names
        self._transport.series[steps] = lane.steps
        self._transport.series[epochs] = lane.epochs
        self._lanes.append(lane)
        return lane

    def _clear_lanes(self) -> None:
        with self._lock:
            for lane in self._lanes:
                for name in lane.series_names:
                    self._transport.series.pop(name, None)
            self._lanes = []
            self.runs = []

    def _publish_lanes(self) -> None:
        """The ``runs`` trait, and the failed runs' errors under the widget."""
        self.runs = [lane.info() for lane in self._lanes]
        errors = [f"[{lane.name}] {lane.error}" for lane in self._lanes if lane.error]
        if errors:
            self.error = "\n\n".join(errors)

    def _lane_changed(self) -> None:
        """A run of the race changed status: its last rows first, then the status."""
        with self._lock:
            if self._transport.paused:
                return
            self._transport.flush()  # publishes the lanes (on_flush)
