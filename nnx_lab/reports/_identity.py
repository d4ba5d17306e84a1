"""Whether a calibrator or policy passed to the report belongs to the run.

A calibrator or policy records ``model_id``: the fingerprint of the weights it was
fitted on (``nnx_lab.calibration.model_fingerprint``); it records no run id. A
fingerprint needs the weights loaded with torch, and this package is torch-free (the
runs panel's server builds reports), so the report compares with the fingerprints the
run folder records: ``export_bundle`` writes them into ``bundles.json`` for each of the
run's checkpoints, with the SHA-256 of the tensors file they were computed from. One
still matching the checkpoint's sidecar is current.

- the model_id is a current fingerprint: shown as fitted on that checkpoint;
- every checkpoint of the run has a current fingerprint and the model_id is none of
  them: refused (``ConfigError``), it was fitted on other weights;
- otherwise (nothing exported, or a checkpoint rewritten since): shown, flagged as not
  checked, with how to get it checked (export a bundle of the run).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..runs import BundleExportsFile, CheckpointFileError, SidecarFile, read_json_file
from ._documents import Documents

__all__ = ["RunWeights", "check_documents", "run_weights"]

UNCHECKED = (
    "not checked against this run's weights: the run folder records no current weights "
    "fingerprint (export_bundle records one); compare it with model_fingerprint(model)"
)


@dataclass(frozen=True)
class RunWeights:
    known: dict[str, str]  # a current fingerprint -> its checkpoint ("last", "best")
    present: tuple[str, ...]  # the run's checkpoints

    @property
    def complete(self) -> bool:
        return bool(self.present) and set(self.present) <= set(self.known.values())


def run_weights(folder: Path, exports: BundleExportsFile | None) -> RunWeights:
    current = {}
    for type_ in ("last", "best"):
        path = folder / "checkpoints" / f"{type_}.json"
        if path.is_file():
            current[type_] = read_json_file(path, SidecarFile, CheckpointFileError).sha256
    known: dict[str, str] = {}
    for entry in [] if exports is None else exports.bundles:
        for w in entry.weights:
            if current.get(w.type) == w.tensors_sha256:
                known[w.fingerprint] = w.type
    return RunWeights(known, tuple(current))


def check_documents(docs: Documents, weights: RunWeights, run_id: str) -> dict[str, str]:
    """Each document's verdict (by its argument name); a document fitted on other
    weights than every checkpoint of the run is refused before anything is written."""
    verdicts = {}
    for name, model_id in docs.model_ids():
        if model_id in weights.known:
            verdicts[name] = f"fitted on this run's {weights.known[model_id].upper()} weights"
        elif weights.complete:
            kinds = ", ".join(f"{t.upper()} {fp}" for fp, t in weights.known.items())
            raise ConfigError(
                f"{name}.model_id",
                model_id,
                f"it was fitted on other weights than run {run_id}'s checkpoints ({kinds}); "
                "pass the one fitted on this run's model, or report the run it was fitted on",
            )
        else:
            verdicts[name] = UNCHECKED
    return verdicts
