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


def test_a_manifest_declares_labels_splits_and_config_as_nnx_does():
    from nnx_lab.data_splits import SplitManifest

    split = SplitManifest(train=[1, 2], val=[3], test=[4])
    m = ExperimentManifest(
        labels=["cat", "dog"],
        splits={"main": split, "holdout": "v2", "unknown": None},
        config={"augment": True},
    )
    assert m.labels == ("cat", "dog")
    assert m.splits == {"main": split.digest(), "holdout": "v2", "unknown": None}
    assert m.config == {"augment": True}
    again = ExperimentManifest.from_json(m.to_json())
    assert again == m
    assert again.fingerprint == m.fingerprint
    assert ExperimentManifest(labels=["dog", "cat"]).fingerprint != (
        ExperimentManifest(labels=["cat", "dog"]).fingerprint
    )
    for bad in (
        {"labels": ["cat", "cat"]},
        {"labels": "cat"},
        {"splits": {"main": 3}},
        {"config": {"x": object()}},
    ):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            ExperimentManifest(**bad)
