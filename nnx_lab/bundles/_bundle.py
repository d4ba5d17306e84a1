"""Inspecting, validating and rebuilding a bundle (§2.22, docs/bundles.md).

A bundle is data: its model is rebuilt from the recipe the manifest and the checkpoint
record (a built-in network, or a registered factory found by its ``(id, version)`` in
the registry or in ``factories=``); nothing in it is imported, called or unpickled.
Rebuilding reads the whole bundle once, checks every digest, then loads the checkpoint
through the same checked reader a local run uses, from a private temporary folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..abstention import AbstentionPolicy
from ..calibration import TemperatureCalibrator
from ..engine.checkpoint import NNCheckpoint
from ..engine.model import NNModel
from ..engine.params import NNTrainParams
from ..engine.registry import (
    register_model_factory,
    registered_model_factories,
    unregister_model_factory,
)
from ..engine.run_handle import NNRun
from ..errors import ConfigError, ResumeError
from ..runs import (
    BundleContents,
    BundleFileError,
    BundleManifestFile,
    read_bundle,
    read_manifest,
    read_record,
    resolve_runs_root,
    run_dir,
)

__all__ = [
    "BundleInfo",
    "ReconstructedBundle",
    "inspect_bundle",
    "reconstruct_bundle",
    "validate_bundle",
]


@dataclass(frozen=True)
class BundleInfo:
    """What a bundle's manifest says: read without touching any other file of it."""

    path: Path
    capability: str  # "resumable" (weights and training state) or "inference" (weights)
    run_id: str
    checkpoint: str  # "last" or "best"
    epoch: int
    step: int
    model: dict[str, Any]  # the recipe: {"net": ..., "model": ...} as run.yaml records it
    calibrators: tuple[str, ...]
    policies: tuple[str, ...]
    files: dict[str, str]  # payload name -> its SHA-256
    nnx_lab: str

    @classmethod
    def of(cls, path: Path, doc: BundleManifestFile) -> BundleInfo:
        return cls(
            path=path,
            capability=doc.capability,
            run_id=doc.run_id,
            checkpoint=doc.checkpoint,
            epoch=doc.epoch,
            step=doc.step,
            model=doc.model,
            calibrators=tuple(doc.calibrators),
            policies=tuple(doc.policies),
            files={p.path: p.sha256 for p in doc.payloads},
            nnx_lab=doc.nnx_lab,
        )

    def summary(self) -> str:
        return (
            f"{self.capability} bundle of run {self.run_id}: {self.checkpoint} checkpoint at "
            f"epoch {self.epoch} (step {self.step}), {len(self.calibrators)} calibrator(s), "
            f"{len(self.policies)} policy(ies), {len(self.files)} files"
        )


def inspect_bundle(path: str | os.PathLike[str]) -> BundleInfo:
    """The bundle's manifest (capability, epoch, model recipe, calibrators, policies);
    only the manifest is read, so this is cheap and checks no payload (see
    ``validate_bundle``)."""
    return BundleInfo.of(Path(path), read_manifest(path))


def validate_bundle(path: str | os.PathLike[str]) -> BundleInfo:
    """Check the whole bundle: exactly the files its manifest lists, plain files only,
    every size and SHA-256 as listed; raises ``BundleFileError`` naming the file."""
    contents = read_bundle(path)
    return BundleInfo.of(contents.path, contents.manifest)


Factories = Mapping[tuple[str, int], Callable[[dict[str, Any]], Any]]


def _check_factories(factories: Any) -> dict[tuple[str, int], Callable[..., Any]]:
    if factories is None:
        return {}
    if not isinstance(factories, Mapping):
        raise ConfigError(
            "factories",
            factories,
            "pass a dict {(id, version): factory}, e.g. {('acme.net', 1): f}",
        )
    out = {}
    for key, factory in factories.items():
        ok = isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str)
        if not ok or isinstance(key[1], bool) or not isinstance(key[1], int):
            raise ConfigError(f"factories[{key!r}]", key, "key each factory by (id, version)")
        if not callable(factory):
            raise ConfigError(f"factories[{key!r}]", factory, "pass a function factory(config)")
        out[key] = factory
    return out


@contextlib.contextmanager
def _registered(factories: dict[tuple[str, int], Callable[..., Any]]) -> Iterator[None]:
    """``factories`` answer their specs for the duration; the registry is as it was
    afterwards (a bundle never changes what another model builds)."""
    before = registered_model_factories()
    try:
        for (model_id, version), factory in factories.items():
            register_model_factory(model_id, version, factory, replace=True)
        yield
    finally:
        now = registered_model_factories()
        for (model_id, version), _ in factories.items():
            old = before.get((model_id, version))
            if old is not None:
                register_model_factory(model_id, version, old, replace=True)
            elif (model_id, version) in now:
                unregister_model_factory(model_id, version)


def _materialize(folder: Path, files: Mapping[str, bytes]) -> None:
    """Write checked payloads into ``folder`` (a new folder this process owns)."""
    folder.mkdir()
    for name, data in files.items():
        dest = folder / name
        dest.parent.mkdir(exist_ok=True)
        with open(dest, "xb") as fh:
            fh.write(data)


def _refuse(contents: BundleContents, field: str, reason: str, value: Any = None) -> Exception:
    return BundleFileError(
        contents.path,
        field,
        reason,
        value=value,
        fix="the bundle was altered after it was exported; ask its author for a fresh copy",
    )


@dataclass
class ReconstructedBundle:
    """A rebuilt bundle: ``model`` predicts exactly as the source run's checkpoint did;
    ``resume(train_params)`` continues its training (a resumable bundle only)."""

    info: BundleInfo
    model: NNModel
    calibrators: list[TemperatureCalibrator]
    policies: list[AbstentionPolicy]
    _files: dict[str, bytes] = field(repr=False)
    _factories: dict[tuple[str, int], Callable[..., Any]] = field(repr=False)

    def resume(self, train_params: NNTrainParams, **train_kwargs: Any) -> NNRun:
        """Train a new run continuing the bundle's run from its checkpoint's training
        state (optimizer, scheduler, RNG, epoch). The bundle's run is placed under
        ``train_params``' runs root first, as the new run's parent (its record, log and
        checkpoints, as exported); an existing run of that id there must hold the same
        record and checkpoints. ``train_kwargs`` go to ``NNModel.train`` (callbacks=,
        components=)."""
        if self.info.capability != "resumable":
            raise ResumeError(
                f"bundle {self.info.path} is an inference bundle (its {self.info.checkpoint} "
                "checkpoint is weights-only): it rebuilds the model but carries no training "
                "state to continue; export a checkpoint written with training state, or "
                "train the rebuilt model with a fresh NNTrainParams"
            )
        if not isinstance(train_params, NNTrainParams):
            raise ConfigError("train_params", train_params, "pass an NNTrainParams")
        if train_params.resume_from_run_id is not None:
            raise ConfigError(
                "train_params.resume_from_run_id",
                train_params.resume_from_run_id,
                "leave it unset: resume() continues the bundle's run",
            )
        root = resolve_runs_root(train_params.runs_root)
        target = run_dir(root, self.info.run_id, "bundle run_id")
        created = self._place_parent(root, target)
        before = set(os.listdir(root))
        params = train_params.replace(
            resume_from_run_id=self.info.run_id, resume_from_checkpoint=self.info.checkpoint
        )
        try:
            with _registered(self._factories):
                return self.model.train(params=params, **train_kwargs)
        except BaseException:
            # refused before a child run existed: take the placed parent back too
            if created and set(os.listdir(root)) == before:
                shutil.rmtree(target, ignore_errors=True)
            raise

    def _place_parent(self, root: Path, target: Path) -> bool:
        """Put the bundle's run under ``root``; False when the same run is there."""
        if os.path.lexists(target):
            # the same run: the same record and checkpoints (its metadata and log are
            # its own, a bundle's metadata leaves out who wrote it)
            for name, data in self._files.items():
                if name in ("metadata.yaml", "metrics.jsonl"):
                    continue
                try:
                    same = (target / name).read_bytes() == data
                except OSError:
                    same = False
                if not same:
                    raise ConfigError(
                        "train_params.runs_root",
                        str(root),
                        f"already holds a run {self.info.run_id} whose {name} differs from "
                        "the bundle's (it trained further, or is another copy); pass "
                        "another runs_root, or resume that run itself",
                    )
            return False
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".{target.name}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            _materialize(tmp, self._files)
            os.rename(tmp, target)
        finally:
            if os.path.lexists(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
        return True


def reconstruct_bundle(
    path: str | os.PathLike[str],
    factories: Factories | None = None,
    *,
    device: Any = None,
) -> ReconstructedBundle:
    """Rebuild the bundle's model (and its calibrators and policies) once the whole
    bundle is validated. A registered module's factory is found by its ``(id,
    version)`` in ``factories`` or the registry (``MissingModelFactoryError`` names it
    otherwise); ``device`` moves the model (default: the one it trained on)."""
    factories = _check_factories(factories)
    contents = read_bundle(path)
    doc = contents.manifest
    info = BundleInfo.of(contents.path, doc)
    with tempfile.TemporaryDirectory(prefix="nnx-bundle-") as tmp:
        folder = Path(tmp) / doc.run_id
        _materialize(folder, contents.files)
        ckpt = NNCheckpoint.load(doc.run_id, doc.checkpoint, tmp)
        recipe = {"net": ckpt.sidecar["net_params"], "model": ckpt.sidecar["model_params"]}
        if recipe != contents.raw_manifest["model"]:
            raise _refuse(contents, "model", "is not the recipe its checkpoint records")
        if (ckpt.epoch, ckpt.step) != (doc.epoch, doc.step):
            raise _refuse(contents, "epoch", "is not the epoch its checkpoint records", doc.epoch)
        if ckpt.weights_only != (doc.capability == "inference"):
            raise _refuse(
                contents, "capability", "is not what its checkpoint holds", doc.capability
            )
        if doc.capability == "resumable":
            ckpt.training_state()  # a damaged state is refused now, not at resume()
        if "metadata.yaml" in contents.files:
            read_record(folder / "metadata.yaml")  # its strict shape, before it is placed
        with _registered(factories):
            model = NNModel.from_checkpoint(ckpt, device=device)
        calibrators = [TemperatureCalibrator.load(folder / name) for name in doc.calibrators]
        policies = [AbstentionPolicy.load(folder / name) for name in doc.policies]
    return ReconstructedBundle(info, model, calibrators, policies, contents.files, factories)
