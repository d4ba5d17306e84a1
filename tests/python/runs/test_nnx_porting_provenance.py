"""Issue 29: ``ExperimentManifest(task=, objective=)`` as NNx spells it."""

from __future__ import annotations

import pytest

from nnx_lab import ConfigError, TaskSpec
from nnx_lab.provenance import ExperimentManifest


def test_a_manifest_declares_its_task_and_objective_as_nnx_does():
    task = TaskSpec.categorical(labels=["cat", "dog"])
    objective = {"id": "kd", "version": 1}
    manifest = ExperimentManifest(task=task, objective=objective)
    assert manifest.task == task.to_json()
    assert manifest.objective == objective
    objective["version"] = 2  # the manifest holds its own copy
    assert manifest.objective == {"id": "kd", "version": 1}
    # each declaration is part of the fingerprint and survives the JSON form
    plain = ExperimentManifest()
    assert "task" not in plain.to_json()  # unset: the fingerprint manifests had before
    assert manifest.fingerprint != plain.fingerprint
    newer = ExperimentManifest(task=task, objective={"id": "kd", "version": 2})
    assert newer.fingerprint != manifest.fingerprint
    again = ExperimentManifest.from_json(manifest.to_json())
    assert again == manifest
    assert again.fingerprint == manifest.fingerprint


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("objective", "kd"),
        ("objective", {1: "kd"}),
        ("objective", {"id": object()}),
        ("task", {"n": float("nan")}),
        ("task", ["categorical"]),
    ],
)
def test_a_declaration_that_is_not_json_is_refused_naming_it(field, value):
    with pytest.raises(ConfigError, match=field):
        ExperimentManifest(**{field: value})
