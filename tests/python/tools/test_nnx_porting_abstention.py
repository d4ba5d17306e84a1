"""Issue 29: abstention and calibration as NNx spells them: the selection's status words,
and policies and calibrators built directly with NNx's arguments."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nnx_lab.abstention import SelectionStatus, select_threshold

TOP = np.array([0.9, 0.9, 0.8, 0.8, 0.8, 0.6])
P = np.stack([TOP, 1 - TOP], 1)
Y = np.array([0, 0, 1, 1, 0, 1])


def test_a_selection_status_reads_as_nnx_words_and_ours():
    found = select_threshold(P, Y, risk_ceiling=0.4, split_id="val")
    none = select_threshold(P, np.array([1, 1, 0, 0, 0, 0]), risk_ceiling=0.0, split_id="val")
    assert found.status == "ok" and found.status == "selected"
    assert found.status != "no_feasible_policy" and found.status != "no_threshold"
    assert none.status == "no_feasible_policy" and none.status == "no_threshold"
    assert none.status != "ok"
    assert (found.status.nnx, none.status.nnx) == ("ok", "no_feasible_policy")
    assert found.ok and not none.ok
    # what the widget and saved states carry stays nnx-lab's word
    assert json.dumps({"status": found.status}) == '{"status": "selected"}'
    assert str(none.status) == "no_threshold"
    assert SelectionStatus("ok") == "selected"
    with pytest.raises(ValueError, match="'ok'"):
        SelectionStatus("fine")
