"""Reading a bundle someone else wrote: a folder or a zip, checked whole before use.
Torch-free, as the run format is: ``nnx_lab.bundles`` rebuilds from what it returns, and
the report (``nnx_lab.reports``) shows a bundle's digest and documents through it.

``read_bundle`` returns the manifest and the bytes of every file it names, once each
file's size and SHA-256 match the manifest; nothing is decoded before that. It refuses
a file the manifest does not name, a file it names that is absent, a link (a folder's
entry or a zip member with a link's mode), a name leaving the bundle (the manifest's
names are a fixed set of plain names), and a bundle over its size cap, with the cap
checked against the declared sizes before a byte is read (a zip bomb is refused by its
headers, and a member that inflates past what it declares is cut at that size).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ._schema import LIMITS, READ_FLAGS, SchemaError, parse_json
from ._schemas.bundle import MANIFEST_FILE, BundleFileError, BundleManifestFile
from ._schemas.reading import check_header, check_shape

__all__ = ["BundleContents", "max_bundle_bytes", "read_bundle", "read_manifest"]

_FIX = (
    "the bundle was damaged or altered after it was exported; ask its author for a fresh "
    "copy (export_bundle)"
)
_CAP_ENV = "NNX_MAX_BUNDLE_BYTES"
_DIRS = ("checkpoints", "calibrators", "policies")
_MEMBERS = 256  # a bundle holds at most ~200 files; a zip with more is refused unread


def max_bundle_bytes() -> int:
    """The most bytes a bundle may hold (its files together): 4 GiB, or the
    ``NNX_MAX_BUNDLE_BYTES`` environment variable."""
    raw = os.environ.get(_CAP_ENV, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else 4 << 30


@dataclass(frozen=True)
class BundleContents:
    """A checked bundle: its manifest (plain and typed) and every payload's bytes."""

    path: Path
    archive: bool
    manifest: BundleManifestFile
    raw_manifest: dict[str, Any]
    files: dict[str, bytes]
    manifest_sha256: str  # of the manifest's bytes: the bundle's one digest


def _refuse(path: Any, field: str, reason: str, value: Any = None) -> BundleFileError:
    return BundleFileError(path, field, reason, value=value, fix=_FIX)


def _manifest(data: bytes, where: Path) -> tuple[BundleManifestFile, dict[str, Any]]:
    if len(data) > LIMITS.record_bytes:
        raise _refuse(where, "", f"is over {LIMITS.record_bytes:,} bytes (a manifest is small)")
    try:
        raw = parse_json(data, where)
    except SchemaError as exc:
        raise _refuse(where, "", f"is not JSON ({exc.reason})") from None
    check_header(raw, where, BundleFileError, ("format", "nnx_lab.bundle", 1), fix=_FIX)
    doc = check_shape(raw, BundleManifestFile, where, BundleFileError, fix=_FIX)
    total = sum(p.bytes for p in doc.payloads)
    cap = max_bundle_bytes()
    if total > cap:
        raise BundleFileError(
            where,
            "payloads",
            f"declare {total:,} bytes, more than the {cap:,} a bundle may hold",
            fix=f"if the bundle is genuine, raise {_CAP_ENV}",
        )
    return doc, raw


def _check_digest(where: Path, name: str, data: bytes, entry: Any) -> None:
    if len(data) != entry.bytes:
        raise _refuse(where, name, f"holds {len(data):,} bytes, the manifest lists {entry.bytes:,}")
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry.sha256:
        raise _refuse(
            where,
            name,
            f"its SHA-256 {digest[:12]}... does not match {entry.sha256[:12]}... in the manifest",
        )


# -- a folder -----------------------------------------------------------------------------------
@contextlib.contextmanager
def _open_plain(path: Path) -> Iterator[BinaryIO]:
    """``path`` opened for reading, never through a link, refused unless a plain file."""
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError as exc:
        raise _refuse(path, "", f"cannot be opened as a plain file ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise _refuse(path, "", "is not a plain file")
        yield fh


def _read_plain(path: Path, size: int) -> bytes:
    """The bytes of a plain file, at most ``size`` + 1 of them."""
    with _open_plain(path) as fh:
        return fh.read(size + 1)


def _folder_entries(root: Path) -> set[str]:
    """Every file of the folder as a relative name; a link or an odd entry is refused."""
    names: set[str] = set()
    stack = [("", root)]
    while stack:
        prefix, folder = stack.pop()
        with os.scandir(folder) as it:
            for entry in it:
                name = f"{prefix}{entry.name}"
                if entry.is_symlink():
                    raise _refuse(root / name, "", "is a link; a bundle holds plain files only")
                if entry.is_dir(follow_symlinks=False):
                    if prefix or entry.name not in _DIRS:
                        raise _refuse(root / name, "", "is a folder a bundle never holds")
                    stack.append((f"{name}/", Path(entry.path)))
                elif entry.is_file(follow_symlinks=False):
                    names.add(name)
                    if len(names) > _MEMBERS:
                        raise _refuse(root, "", f"holds more than {_MEMBERS} files")
                else:
                    raise _refuse(root / name, "", "is not a plain file")
    return names


def _read_folder(root: Path) -> BundleContents:
    if root.is_symlink() or not root.is_dir():
        raise _refuse(root, "", "is not a bundle folder (a link or not a folder)")
    names = _folder_entries(root)
    where = root / MANIFEST_FILE
    if MANIFEST_FILE not in names:
        raise _refuse(where, "", "is missing: a bundle folder starts with its manifest")
    manifest = _read_plain(where, LIMITS.record_bytes)
    doc, raw = _manifest(manifest, where)
    _same_names(root, names - {MANIFEST_FILE}, doc)
    files = {}
    for entry in doc.payloads:
        data = _read_plain(root / entry.path, entry.bytes)
        _check_digest(root / entry.path, "", data, entry)
        files[entry.path] = data
    return BundleContents(root, False, doc, raw, files, hashlib.sha256(manifest).hexdigest())


def _same_names(where: Path, present: set[str], doc: BundleManifestFile) -> None:
    listed = {p.path for p in doc.payloads}
    for name in sorted(present - listed):
        raise _refuse(where / name, "", "is not listed in the manifest (an extra file)")
    for name in sorted(listed - present):
        raise _refuse(where / name, "", "is listed in the manifest but missing")


# -- a zip --------------------------------------------------------------------------------------
def _member_problem(info: zipfile.ZipInfo) -> str | None:
    mode = info.external_attr >> 16
    if info.is_dir():
        return "is a folder entry (the writer stores files only)"
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG):  # 0: a writer that records no type
        return "is a link or a special file; a bundle holds plain files only"
    if info.flag_bits & 0x1:
        return "is encrypted"
    return None


def _read_zip(path: Path) -> BundleContents:
    with _open_plain(path) as fh:
        try:
            zf = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, OSError) as exc:
            raise _refuse(path, "", f"is not a zip archive ({exc})") from None
        with zf:
            infos = zf.infolist()
            if len(infos) > _MEMBERS:
                raise _refuse(path, "", f"holds {len(infos)} entries; a bundle holds fewer")
            members: dict[str, zipfile.ZipInfo] = {}
            for info in infos:
                problem = _member_problem(info)
                if problem is not None:
                    raise _refuse(path, info.filename, problem)
                if info.filename in members:
                    raise _refuse(path, info.filename, "appears twice in the archive")
                members[info.filename] = info
            if MANIFEST_FILE not in members:
                raise _refuse(path, MANIFEST_FILE, "is missing from the archive")
            where = path / MANIFEST_FILE
            manifest = _member(zf, path, members[MANIFEST_FILE], LIMITS.record_bytes)
            doc, raw = _manifest(manifest, where)
            # a member name outside the fixed set (a traversal, an absolute path) is
            # refused here, as an extra file, before anything is inflated
            _same_names(path, set(members) - {MANIFEST_FILE}, doc)
            files = {}
            for entry in doc.payloads:
                info = members[entry.path]
                if info.file_size != entry.bytes:
                    raise _refuse(
                        path,
                        entry.path,
                        f"declares {info.file_size:,} bytes, the manifest lists {entry.bytes:,}",
                    )
                data = _member(zf, path, info, entry.bytes)
                _check_digest(path, entry.path, data, entry)
                files[entry.path] = data
    return BundleContents(path, True, doc, raw, files, hashlib.sha256(manifest).hexdigest())


def _member(zf: zipfile.ZipFile, path: Path, info: zipfile.ZipInfo, size: int) -> bytes:
    """A member's bytes, inflated at most to ``size`` + 1 (a lying header stops there)."""
    try:
        with zf.open(info) as fh:
            return fh.read(size + 1)
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as exc:
        raise _refuse(path, info.filename, f"cannot be read ({exc})") from None


def read_bundle(path: str | os.PathLike[str]) -> BundleContents:
    """The checked contents of the bundle folder or zip at ``path``."""
    path = Path(path)
    if not os.path.lexists(path):
        raise BundleFileError(path, "", "no such bundle", fix="check the path")
    if path.is_dir() and not path.is_symlink():
        return _read_folder(path)
    return _read_zip(path)


def read_manifest(path: str | os.PathLike[str]) -> BundleManifestFile:
    """The checked manifest of the bundle at ``path``; no other file is read."""
    path = Path(path)
    if not os.path.lexists(path):
        raise BundleFileError(path, "", "no such bundle", fix="check the path")
    if path.is_dir() and not path.is_symlink():
        where = path / MANIFEST_FILE
        if not os.path.lexists(where):
            raise _refuse(where, "", "is missing: a bundle folder starts with its manifest")
        return _manifest(_read_plain(where, LIMITS.record_bytes), where)[0]
    with _open_plain(path) as fh:
        try:
            with zipfile.ZipFile(fh) as zf:
                info = zf.getinfo(MANIFEST_FILE)
                problem = _member_problem(info)
                if problem is not None:
                    raise _refuse(path, MANIFEST_FILE, problem)
                data = _member(zf, path, info, LIMITS.record_bytes)
        except KeyError:
            raise _refuse(path, MANIFEST_FILE, "is missing from the archive") from None
        except (zipfile.BadZipFile, OSError) as exc:
            raise _refuse(path, "", f"is not a zip archive ({exc})") from None
    return _manifest(data, path / MANIFEST_FILE)[0]
