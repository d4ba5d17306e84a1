"""Share a run as a data-only bundle (§2.22, docs/bundles.md).

from nnx_lab.bundles import export_bundle, inspect_bundle, reconstruct_bundle, validate_bundle

export_bundle(run.id, "bundle", calibrators=[calibrator])
inspect_bundle("bundle")          # BundleInfo from the manifest alone
validate_bundle("bundle")         # every file's size and SHA-256
rebuilt = reconstruct_bundle("bundle", factories={("acme.encoder", 1): factory})
rebuilt.model.predict(X)          # exactly the source checkpoint's predictions
rebuilt.resume(train_params)      # a new run continuing the bundle's training state
"""

from ..runs import BundleFileError
from ._bundle import (
    BundleInfo,
    ReconstructedBundle,
    inspect_bundle,
    reconstruct_bundle,
    validate_bundle,
)
from ._export import export_bundle

__all__ = [
    "BundleFileError",
    "BundleInfo",
    "ReconstructedBundle",
    "export_bundle",
    "inspect_bundle",
    "reconstruct_bundle",
    "validate_bundle",
]
