"""Sharing datasets through remotes: any fsspec URL.

A remote is a folder-like location. A dataset ``ns/name-vN`` sits there either as a folder
``<remote>/ns/name-vN/`` (``dataset.json`` plus its files, the default) or as one archive
``<remote>/ns/name-vN.tar.gz`` (``upload --archive``). Examples of remotes:

* ``file:///srv/dream-gym-worlds`` (or a plain local path), tested for real;
* ``hf://NAMESPACE`` or ``hf://datasets/OWNER/REPO`` — the Hugging Face Hub, through
  ``huggingface_hub`` itself, not this module's fsspec path (:mod:`dream_gym.datasets.hub`: one
  repository per dataset, a folder per version, one commit per upload, the card at the
  repository's root; ``pip install dream-gym[share]``; uploads need ``hf auth login`` or ``HF_TOKEN``);
* ``s3://bucket/prefix``, ``gcs://...``, ``sftp://...`` or any other fsspec protocol whose
  package is installed.

``DREAM_GYM_REMOTE`` names the remote used when none is given (for example
``DREAM_GYM_REMOTE=hf://dream-gym``). A dataset id without its version (``ns/name``) means the
newest version at the remote.

Downloads check ``dataset.json``'s format version before fetching anything (as Minari checks
its version specifier), then verify every file's sha256: a tampered or corrupt file is refused
with its name and nothing is added to the store. Nothing fetched can exhaust memory or disk:
dataset.json is read within the limits of :mod:`dream_gym.infrastructure.limits`, a file larger than the limit
on decompressed data (256 MB, ``DREAM_GYM_MAX_DECOMPRESSED_MB``) is refused before it is
fetched, archives are unpacked as bounded streams (:mod:`dream_gym.datasets.archive`) and every
world is loaded as a bounded stream.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

from dream_gym.datasets.archive import (
    UnsafeArchiveError,
    check_members,
    make_archive,
    member_name,
    safe_extract,
)
from dream_gym.datasets.fetched import (
    RemoteDataset,
    RemoteError,
    check_id,
    install_verified,
    listed,
    local_copy,
)
from dream_gym.datasets.ids import DatasetId, DatasetName, parse_dataset_id, parse_dataset_ref
from dream_gym.datasets.store import (
    DATASET_FILE,
    REPLACE_HINT,
    Dataset,
    DatasetError,
    DatasetNotFoundError,
    find_dataset,
    local_path,
    open_dataset_folder,
    parse_dataset_json,
    read_dataset_meta,
    remove_if_empty,
    safe_relative_path,
    staging_folder,
    verify_files,
)
from dream_gym.infrastructure.extras import install_command
from dream_gym.infrastructure.limits import (
    decompressed_limit_problem,
    leftover_problem,
    max_decompressed_bytes,
)
from dream_gym.world.tree import sha256_file

REMOTE_ENV = "DREAM_GYM_REMOTE"


def default_remote() -> str | None:
    """The remote named by ``DREAM_GYM_REMOTE`` (e.g. ``hf://dream-gym``), or None."""
    value = os.environ.get(REMOTE_ENV, "").strip()
    return value or None


def resolve_remote(remote: str | None) -> str:
    """``remote``, else ``DREAM_GYM_REMOTE``; raise :class:`RemoteError` when neither is set."""
    if remote:
        return remote
    found = default_remote()
    if found is None:
        raise RemoteError(
            f"no remote given: pass --remote URL (remote=... in Python) or set {REMOTE_ENV} "
            "(for example hf://NAMESPACE for the Hugging Face Hub, or file:///srv/worlds)"
        )
    return found


def _is_hub(remote: str) -> bool:
    from dream_gym.datasets.hub import is_hub_remote

    return is_hub_remote(remote)


def _filesystem(remote: str) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError:  # pragma: no cover - fsspec is in the share extra
        raise RemoteError(f"remotes need fsspec: {install_command('share')}") from None
    try:
        fs, root = fsspec.core.url_to_fs(remote)
    except (ImportError, ValueError) as exc:
        raise RemoteError(f"cannot open remote {remote!r}: {exc}") from None
    return fs, str(root).rstrip("/")


def _readable(remote: str) -> tuple[Any, str]:
    """The remote's file system and root, to read from: a local remote that is no folder is a
    RemoteError (a mistyped path is not an empty remote, nor one without the dataset)."""
    fs, root = _filesystem(remote)
    if "file" in _protocols(fs) and not fs.isdir(root):
        raise RemoteError(f"remote {remote}: {'not a folder' if fs.exists(root) else 'no such folder'}")
    return fs, root


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def _join(root: str, *parts: str) -> str:
    return "/".join([root, *parts]) if root else "/".join(parts)


def list_remote(remote: str | None = None) -> list[RemoteDataset]:
    """Datasets found at a remote (folders with a dataset.json, and ``.tar.gz`` archives; on the
    Hub, every version of every dream_gym dataset repository). ``remote`` defaults to
    ``DREAM_GYM_REMOTE``."""
    remote = resolve_remote(remote)
    if _is_hub(remote):
        from dream_gym.datasets import hub

        return hub.list_remote(remote)
    fs, root = _readable(remote)
    found: list[RemoteDataset] = []
    for path in sorted(fs.glob(_join(root, "*", "*", DATASET_FILE))):
        try:
            _check_regular(fs, path)
            with fs.open(path, "rb") as stream:
                meta = parse_dataset_json(path, stream, validate=False)[1]
            found.append(listed(meta, str(path).rsplit("/", 1)[0]))
        except (ValueError, OSError) as exc:
            found.append(RemoteDataset("(unreadable)", str(path), "folder", f"error: {exc}"))
    for path in sorted(fs.glob(_join(root, "*", "*.tar.gz"))):
        namespace = str(path).split("/")[-2]
        found.append(RemoteDataset(f"{namespace}/{str(path).split('/')[-1][:-7]}", str(path), "archive"))
    return found


def upload(dataset_id: str, remote: str | None = None, *, archive: bool = False, overwrite: bool = False) -> str:
    """Copy a local (or the shipped) dataset to ``remote`` (default ``DREAM_GYM_REMOTE``);
    return where it went.

    The dataset's files are verified first, so a corrupt local copy is never published.
    In folder mode ``dataset.json`` is written last: an interrupted upload is not listed.
    An ``hf://`` remote gets one commit (:func:`dream_gym.datasets.hub.upload`).
    """
    remote = resolve_remote(remote)
    if _is_hub(remote):
        if archive:
            raise RemoteError(
                f"{remote}: --archive is for fsspec remotes; the Hub keeps a version's files in its "
                "folder vN/, all in one commit (upload without --archive)"
            )
        from dream_gym.datasets import hub

        return hub.upload(dataset_id, remote, overwrite=overwrite).location
    did = parse_dataset_id(dataset_id)
    dataset = find_dataset(str(did))
    verify_files(dataset.path, dataset.meta)
    fs, root = _filesystem(remote)
    archived = _join(root, did.namespace, f"{did.name}-v{did.version}.tar.gz")
    folder = _join(root, did.namespace, f"{did.name}-v{did.version}")
    other = _join(folder, DATASET_FILE) if archive else archived  # a version names one copy at a remote
    if fs.exists(other):
        if not overwrite:
            raise FileExistsError(f"{remote} already holds {did} as {'a folder' if archive else 'an archive'} "
                                  f"({other}) {REPLACE_HINT}")
        fs.rm(folder if archive else archived, recursive=archive)
    if archive:
        target = archived
        if fs.exists(target) and not overwrite:
            raise FileExistsError(f"{target} already exists at the remote {REPLACE_HINT}")
        with tempfile.TemporaryDirectory() as tmp:
            # the listed files only: a download refuses an archive that holds any other (a README
            # or a build script beside them in the store)
            packed = make_archive(dataset.path, Path(tmp) / "dataset.tar.gz", [*dataset.meta["files"], DATASET_FILE])
            fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
            fs.put_file(str(packed), target)
        return target
    if fs.exists(_join(folder, DATASET_FILE)) and not overwrite:
        raise FileExistsError(f"{folder} already holds dataset {did} at the remote {REPLACE_HINT}")
    for rel in dataset.meta["files"]:
        target = _join(folder, rel)
        fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        fs.put_file(str(dataset.path / rel), target)
    fs.put_file(str(dataset.path / DATASET_FILE), _join(folder, DATASET_FILE))
    _remove_unlisted(fs, folder, {*dataset.meta["files"], DATASET_FILE})
    return folder


def _remove_unlisted(fs: Any, folder: str, listed: set[str]) -> None:
    """Remove what a version replaced by ``--force`` left at the remote beside its new files (the
    old version's worlds, which the new dataset.json no longer lists), once the new files are all there."""
    prefix = folder.rstrip("/") + "/"
    for path in fs.find(folder):
        rel = str(path)[len(prefix):] if str(path).startswith(prefix) else None
        if rel is not None and rel not in listed:
            fs.rm(path)


def download(dataset_id: str, remote: str | None = None, *, overwrite: bool = False,
             skip_existing: bool = False) -> Dataset:
    """Fetch ``dataset_id`` from ``remote`` (default ``DREAM_GYM_REMOTE``) into the local store,
    verifying every sha256. An id without its version (``ns/name``) fetches the newest version at
    the remote. A version already in the store is an error (:class:`FileExistsError`), unless
    ``overwrite`` (replace it) or ``skip_existing`` (return it, nothing fetched)."""
    remote = resolve_remote(remote)
    ref = parse_dataset_ref(dataset_id)
    if _is_hub(remote):
        from dream_gym.datasets import hub

        return hub.download(ref, remote, overwrite=overwrite, skip_existing=skip_existing)
    did = ref if isinstance(ref, DatasetId) else ref.version(latest_version(ref, remote))
    if (kept := local_copy(did, overwrite=overwrite, skip_existing=skip_existing)) is not None:
        return kept
    target = local_path(did)
    fs, root = _readable(remote)
    folder = _join(root, did.namespace, f"{did.name}-v{did.version}")
    archive = folder + ".tar.gz"
    staging, made = staging_folder(did, "download-")
    try:
        if fs.exists(_join(folder, DATASET_FILE)):
            source = folder
            _download_folder(fs, folder, staging, str(did))
        elif fs.exists(archive):
            source = archive
            _download_archive(fs, archive, staging, str(did))
        else:
            raise DatasetNotFoundError(
                f"dataset {did} is not at remote {remote} (looked for {_join(folder, DATASET_FILE)} "
                f"and {archive}); `dream-gym worlds list --remote {remote}` shows what it holds"
            )
        install_verified(source, staging, did, target, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if made:
            remove_if_empty(target.parent)  # the namespace's folder this download made, for nothing
        raise
    return open_dataset_folder(target)


def latest_version(name: DatasetName, remote: str | None = None) -> int:
    """The newest version of dataset ``name`` (``ns/name``) at ``remote``; raise
    :class:`DatasetNotFoundError` when it holds none."""
    remote = resolve_remote(remote)
    if _is_hub(remote):
        from dream_gym.datasets import hub

        return hub.latest_version(name, remote)
    fs, root = _readable(remote)
    pattern = re.compile(rf"^{re.escape(name.name)}-v(0|[1-9][0-9]*)(?:\.tar\.gz)?$")
    versions = set()
    for path in [*fs.glob(_join(root, name.namespace, f"{name.name}-v*", DATASET_FILE)),
                 *fs.glob(_join(root, name.namespace, f"{name.name}-v*.tar.gz"))]:
        parts = str(path).split("/")
        match = pattern.match(parts[-2] if parts[-1] == DATASET_FILE else parts[-1])
        if match:
            versions.add(int(match[1]))
    if not versions:
        raise DatasetNotFoundError(
            f"dataset {name} is not at remote {remote} (no {name.namespace}/{name.name}-vN/{DATASET_FILE} "
            f"nor {name.name}-vN.tar.gz); `dream-gym worlds list --remote {remote}` shows what it holds"
        )
    return max(versions)


def _download_folder(fs: Any, folder: str, staging: Path, expected: str) -> None:
    meta_url = _join(folder, DATASET_FILE)
    _check_regular(fs, meta_url)
    with fs.open(meta_url, "rb") as stream:
        raw, meta = parse_dataset_json(meta_url, stream)  # format/version check before any world is fetched
    check_id(meta_url, meta, expected)
    limit = max_decompressed_bytes()
    for rel, digest in meta["files"].items():
        safe_relative_path(meta_url, rel)
        _check_no_link_inside(fs, folder, rel)
        local = staging / rel
        local.parent.mkdir(parents=True, exist_ok=True)
        try:
            _fetch_bounded(fs, _join(folder, rel), local, limit)
        except FileNotFoundError:
            raise RemoteError(f"{_join(folder, rel)}: listed in dataset.json but missing at the remote; "
                              "download refused") from None
        actual = sha256_file(local)
        if actual != digest:
            raise DatasetError(
                f"{_join(folder, rel)}: sha256 mismatch (dataset.json says {digest}, the file has "
                f"{actual}); the remote copy was tampered with or corrupted, download refused"
            )
    (staging / DATASET_FILE).write_bytes(raw)


def _check_remote_size(fs: Any, url: str, limit: int) -> None:
    """Refuse a remote file larger than the limit before fetching it (no dataset file is larger)."""
    try:
        size = fs.size(url)
    except (OSError, NotImplementedError):
        return  # the file system cannot tell: the world loader's own limits still apply
    if size is not None and size > limit:
        raise DatasetError(f"{url}: " + decompressed_limit_problem(limit, f"holds {size} bytes,") + "; download refused")


def _check_regular(fs: Any, url: str) -> None:
    """On a remote in this machine's file system (``file://``), anything but a regular file is
    refused before it is opened: a link would read a file from outside the remote (and a sha256
    mismatch would then tell its digest), a FIFO would wait for a writer for ever."""
    if "file" not in _protocols(fs):
        return
    try:
        mode = os.lstat(fs._strip_protocol(url)).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(url) from None
    if not stat.S_ISREG(mode):
        raise DatasetError(f"{url} {leftover_problem(mode, 0, 1)}; a remote's files are read as data only")


def _check_no_link_inside(fs: Any, folder: str, rel: str) -> None:
    """On a ``file://`` remote, refuse a dataset's file reached through a linked folder inside the
    dataset (``sub -> /proc/self`` and the file ``sub/environ``): it would be read from outside the
    remote, and a sha256 mismatch would tell its digest. (:func:`_check_regular` sees the last
    component only.)"""
    if "file" not in _protocols(fs):
        return
    base = os.path.realpath(fs._strip_protocol(folder))
    parent = os.path.join(base, *rel.split("/")[:-1])  # (a link as the file itself is _check_regular's)
    if os.path.realpath(parent) != parent:
        raise DatasetError(f"{_join(folder, rel)}: reached through a link inside the dataset; a remote's files are "
                           "read from inside it only, download refused")


def _fetch_bounded(fs: Any, url: str, local: Path, limit: int) -> None:
    """Copy a remote file to ``local``, refusing one of more than ``limit`` bytes: by its size
    where the remote tells it, else while it is read (a remote that tells none, or lies, cannot
    fill the disk)."""
    _check_regular(fs, url)
    _check_remote_size(fs, url, limit)
    copied = 0
    with fs.open(url, "rb") as source, open(local, "wb") as target:
        while chunk := source.read(1 << 20):
            copied += len(chunk)
            if copied > limit:
                raise DatasetError(f"{url}: " + decompressed_limit_problem(limit, f"holds more than {limit} bytes,")
                                   + "; download refused")
            target.write(chunk)


def _download_archive(fs: Any, archive: str, staging: Path, expected: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "dataset.tar.gz"
        _fetch_bounded(fs, archive, local, max_decompressed_bytes())  # an archive is smaller than its contents
        try:  # its dataset.json first: a member it does not list is refused before anything else is written
            members = check_members(local)
            safe_extract(local, staging, members=members, only={DATASET_FILE})
            meta = read_dataset_meta(staging)
            check_id(archive, meta, expected)
            listed = set(meta["files"]) | {DATASET_FILE}
            unlisted = sorted(name for member in members if not member.isdir()
                              and (name := member_name(local, member)) not in listed)
            if unlisted:
                raise DatasetError(f"{archive}: holds files not listed in dataset.json: {', '.join(unlisted)}")
            safe_extract(local, staging, members=members, only=listed - {DATASET_FILE})
        except UnsafeArchiveError as exc:  # named by the remote's address, not the temporary copy
            raise UnsafeArchiveError(str(exc).replace(str(local), archive, 1) + "; download refused") from None
    try:
        verify_files(staging, meta)
    except DatasetError as exc:  # a member is named inside the archive, not in the staging folder that goes
        raise DatasetError(f"{archive}: {str(exc).replace(f'{staging}{os.sep}', '')}; download refused") from None
