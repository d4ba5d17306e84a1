"""``nnx_lab.provenance``: record what an experiment was meant to be (§2.15).

::

    from nnx_lab.provenance import ExperimentManifest, compare, hash_file

    manifest = ExperimentManifest.for_model(model, train=params,
                                            data={"train": hash_file("train.csv")})
    run = model.train(params=params, provenance=manifest)
    run.provenance.fingerprint          # the plan: same manifest, same fingerprint
    run.provenance.attempt.attempt_id   # this fit: fresh on every train() call
    compare(run.id, other_run.id).differences

A plain string id (``data={"train": "animals-v2"}``) is recorded as declared and never
reported as verified; only ``hash_file`` / ``hash_bytes`` digests are. A run trained
without a manifest has ``run.provenance is None``. Loads no torch.
"""

from .runs._provenance import (
    Attempt,
    Digest,
    ExperimentManifest,
    Provenance,
    hash_bytes,
    hash_file,
)
from .runs._provenance_compare import Comparison, Difference, compare

__all__ = [
    "Attempt",
    "Comparison",
    "Difference",
    "Digest",
    "ExperimentManifest",
    "Provenance",
    "compare",
    "hash_bytes",
    "hash_file",
]
