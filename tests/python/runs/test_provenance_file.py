"""A provenance.json from someone else (issue 20, section 2): one ProvenanceFileError (a
SchemaError and the RunRecordError callers always caught) naming the file and the field,
from every reader: NNRun.load, read_provenance, compare."""

from __future__ import annotations

import json
import shutil

import engine_factories as f
import hostile_factories as h
import pytest

from nnx_lab import NNRun
from nnx_lab.provenance import ExperimentManifest, Provenance, compare
from nnx_lab.runs import ProvenanceFileError, RunRecordError, read_provenance


def _train(root, **kw):
    model = f.model()
    params = f.train_params(root, n_epochs=1, **kw)
    manifest = ExperimentManifest.for_model(model, train=params, data={"train": "animals-v2"})
    return model.train(params, provenance=manifest)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("provenance-runs")
    return root, _train(root), _train(root, seed=7)


@pytest.fixture
def run(two_runs, tmp_path):
    """A private copy of the first run (tests edit its provenance.json)."""
    _, a, _ = two_runs
    shutil.copytree(a.run_dir, tmp_path / a.id)
    return tmp_path, a.id


def _load(root, run_id):
    return lambda path: NNRun.load(run_id, runs_root=root)


def _set(path: str, value):
    *parents, key = path.split(".")

    def change(d):
        for p in parents:
            d = d[p]
        d[key] = value

    return change


CASES = {
    "fingerprint not hex": (_set("fingerprint", "abc"), "fingerprint", "regex"),
    "fingerprint edited": (_set("fingerprint", "0" * 64), "fingerprint", "does not hash"),
    "format 2": (_set("format", 2), "format", "2"),
    "pid negative": (_set("attempt.pid", -1), "attempt.pid", ">= 1"),
    "started_at NaN": (_set("attempt.started_at", float("nan")), "attempt.started_at", "finite"),
    "run_id 5": (_set("attempt.run_id", 5), "attempt.run_id", "got `int`"),
    "attempt missing": (lambda d: d.pop("attempt"), "attempt", "missing"),
    "net a string": (_set("manifest.net", "relu"), "manifest.net", "got `str`"),
    "a 100-bit integer in train": (
        _set("manifest.train.n_epochs", 2**100),
        "manifest.train.n_epochs",
        "wider than 64 bits",
    ),
    "Infinity in model": (
        _set("manifest.model.lr", float("inf")),
        "manifest.model.lr",
        "finite",
    ),
    "a declared id empty": (
        _set("manifest.data.train", {"declared": ""}),
        "manifest.data.train.declared",
        "length >= 1",
    ),
    "a digest of another algorithm": (
        _set("manifest.data.train", {"digest": "md5:00", "size": 1, "source": "file"}),
        "manifest.data.train.digest",
        "regex",
    ),
    "a digest without its size": (
        _set("manifest.data.train", {"digest": "sha256:" + "0" * 64, "source": "file"}),
        "manifest.data.train.size",
        "missing",
    ),
    "declared and a digest at once": (
        _set("manifest.data.train", {"declared": "x", "digest": "sha256:" + "0" * 64}),
        "manifest.data.train.declared",
        "not both",
    ),
    "unknown field": (_set("attempt.command", "rm"), "attempt.command", "not a field"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_hostile_provenance_is_refused_by_field(run, case):
    root, run_id = run
    change, field, says = CASES[case]
    path = h.edited(root / run_id / "provenance.json", change)
    err = h.refused(_load(root, run_id), path, RunRecordError, field)
    assert isinstance(err, ProvenanceFileError)
    assert says in str(err)


@pytest.mark.parametrize("data", h.HOSTILE_BYTES, ids=list(h.HOSTILE_BYTES))
def test_hostile_bytes_are_one_record_error(run, data):
    root, run_id = run
    path = root / run_id / "provenance.json"
    path.write_bytes(h.HOSTILE_BYTES[data])
    h.refused(_load(root, run_id), path, RunRecordError, "")


def test_a_100_mb_provenance_a_pipe_and_a_folder_are_refused(run):
    root, run_id = run
    path = root / run_id / "provenance.json"
    path.unlink()
    h.refused_without_reading(_load(root, run_id), h.a_100_mb_file(path), RunRecordError)
    path.unlink()
    h.refused(_load(root, run_id), h.a_pipe(path), RunRecordError, "")  # not "absent"
    path.unlink()
    path.mkdir()
    h.refused(_load(root, run_id), path, RunRecordError, "")


def test_a_provenance_copied_from_another_run_is_refused_even_with_its_run_id_edited(two_runs, run):
    root, run_id = run
    _, _, other = two_runs
    path = root / run_id / "provenance.json"
    shutil.copy(other.run_dir / "provenance.json", path)
    h.refused(_load(root, run_id), path, RunRecordError, "attempt.run_id")
    h.edited(path, _set("attempt.run_id", run_id))  # the one field a forger would edit
    err = h.refused(_load(root, run_id), path, RunRecordError, "manifest.train")
    assert "copied from another run" in str(err)
    assert "train.seed" in str(err)  # the first difference is named
    with pytest.raises(ProvenanceFileError, match="copied from another run"):
        compare(run_id, other.id, runs_root=root)


def test_the_check_against_run_yaml_uses_the_record_it_is_given(run):
    root, run_id = run
    record = json.loads(json.dumps(NNRun.load(run_id, runs_root=root).config))
    assert isinstance(read_provenance(root / run_id, run_id, record), Provenance)
    record["train"]["seed"] = 99
    with pytest.raises(ProvenanceFileError, match=r"manifest\.train"):
        read_provenance(root / run_id, run_id, record)


def test_from_json_is_as_strict_as_the_file(run):
    root, run_id = run
    data = json.loads((root / run_id / "provenance.json").read_text())
    assert Provenance.from_json(data).attempt.run_id == run_id
    with pytest.raises(ProvenanceFileError) as info:
        Provenance.from_json({**data, "attempt": {**data["attempt"], "pid": "1"}})
    assert info.value.field == "attempt.pid"
    with pytest.raises(RunRecordError, match="model: missing"):
        ExperimentManifest.from_json({"net": None})
