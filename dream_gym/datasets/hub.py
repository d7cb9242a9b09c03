"""Datasets on the Hugging Face Hub: one repository per dataset, one folder per version, one commit per upload.

Layout. ``hf://NAMESPACE`` (or ``hf://datasets/NAMESPACE``) keeps dataset ``ns/name-vN`` in the
dataset repository ``NAMESPACE/name``; ``hf://datasets/OWNER/REPO`` names the repository itself.
A repository holds the versions of one dataset, each in a folder::

    README.md            the dataset card the Hub shows: YAML front matter (license, tags,
                         pretty_name, task_categories, size_categories) and the newest version's card
    v0/dataset.json      dream_gym's own metadata: format, id, split, the sha256 of every file
    v0/<world>/...       the worlds of version 0, byte for byte as in the local store
    v1/...

Versions are folders, not branches or tags: every version is on ``main`` at once (the Hub's file
browser shows them side by side, one listing finds the newest, and a download fetches one
folder), and uploading an older version after a newer one cannot move anything back.

An upload is one ``create_commit`` holding every file of the version and the card (the Hub
limits commits per hour; one file per commit, as the fsspec path made, fails half-way through a
dataset of 129 files). It is made on the commit it read (``parent_commit``), so a commit landed
meanwhile makes it fail instead of overwriting. A download reads the version's ``dataset.json``
first (format version check), then fetches only the files it lists and checks each sha256
before anything enters the local store. The server is not trusted to end what it sends: each
file is read through a budget (at most the size the listing gives it, at :data:`MIN_BYTES_PER_S`
or faster after :data:`GRACE_S`), and a listing is read for at most :data:`MAX_LISTED` entries.

Errors are one line: an unreachable Hub raises :class:`~dream_gym.datasets.remote.RemoteError`
naming the remote, the endpoint and the cause; a missing repository or version raises
:class:`~dream_gym.datasets.store.DatasetNotFoundError`. ``HF_ENDPOINT`` (read at each call) and
``HF_TOKEN`` / ``hf auth login`` work as for ``huggingface_hub``.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dream_gym.datasets.fetched import (
    RemoteDataset,
    RemoteError,
    check_id,
    check_not_shipped,
    install_verified,
    listed,
    remove_if_empty,
)
from dream_gym.datasets.hub_card import CARD_FILE, TAG, dataset_card, local_card
from dream_gym.datasets.ids import DatasetId, DatasetName, parse_dataset_id
from dream_gym.datasets.store import (
    DATASET_FILE,
    REPLACE_HINT,
    Dataset,
    DatasetError,
    DatasetNotFoundError,
    find_dataset,
    local_path,
    parse_dataset_json,
    safe_relative_path,
)
from dream_gym.infrastructure.extras import install_command
from dream_gym.infrastructure.limits import (
    decompressed_limit_problem,
    line_limit_problem,
    max_decompressed_bytes,
    max_line_bytes,
)
from dream_gym.infrastructure.printable import printable
from dream_gym.world.tree import sha256_file

SCHEME = "hf://"
REPO_TYPE = "dataset"
#: The most entries one listing is read for (folders at a repository's root, files of a version,
#: repositories of a namespace): a server whose listing has no last page is cut off there.
MAX_LISTED = 100_000
#: The slowest a file may arrive, on average, after a grace of :data:`GRACE_S`: a server that
#: trickles a byte every few seconds (under the client's read timeout) is cut off.
MIN_BYTES_PER_S = 20_000
GRACE_S = 60.0
_VERSION_RE = re.compile(r"^v(0|[1-9][0-9]*)$")
_HUB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")


def is_hub_remote(remote: str) -> bool:
    return remote.startswith(SCHEME)


@dataclass(frozen=True)
class HubRemote:
    """A parsed ``hf://`` remote: a namespace (one repository per dataset) or one repository."""

    url: str
    namespace: str
    repo: str | None = None

    def repo_id(self, name: str) -> str:
        repo_id = f"{self.namespace}/{self.repo or name}"
        part = repo_id.split("/")[1]
        if not _HUB_NAME_RE.match(part) or "--" in part or ".." in part or part.endswith((".", "-")):
            raise DatasetError(
                f"{self.url}: {part!r} cannot name a Hub repository (letters, digits, '-', '_', '.', at most "
                "96, no '--' or '..', not ending in '-' or '.'); upload to hf://datasets/OWNER/REPO with a "
                "name that can"
            )
        return repo_id

    def location(self, repo_id: str, version: int | None = None) -> str:
        return f"{SCHEME}datasets/{repo_id}" + ("" if version is None else f"/v{version}")


def parse_hub_remote(remote: str) -> HubRemote:
    """``hf://NAMESPACE``, ``hf://datasets/NAMESPACE`` or ``hf://datasets/OWNER/REPO``."""
    parts = [p for p in remote[len(SCHEME):].split("/") if p]
    if parts and parts[0] == "datasets":
        parts = parts[1:]
    if not 1 <= len(parts) <= 2 or any("@" in p or not _HUB_NAME_RE.match(p) for p in parts):
        raise RemoteError(
            f"bad Hugging Face remote {remote!r}: expected hf://NAMESPACE (one dataset repository per "
            "dataset, NAMESPACE/<name>) or hf://datasets/OWNER/REPO (that repository)"
        )
    return HubRemote(remote, parts[0], parts[1] if len(parts) == 2 else None)


def endpoint() -> str:
    """The Hub's address: ``HF_ENDPOINT`` as it is now (the client reads it once, at import)."""
    env = os.environ.get("HF_ENDPOINT")
    if env:
        return env.rstrip("/")
    from huggingface_hub import constants

    return str(constants.ENDPOINT).rstrip("/")


def _version() -> str:
    """dream-gym's installed version (read from the install, not from ``dream_gym``, which imports
    this package)."""
    try:
        return importlib.metadata.version("dream-gym")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _api() -> Any:
    try:
        from huggingface_hub import HfApi
    except ImportError:  # huggingface_hub is in the share extra
        raise RemoteError(f"hf:// remotes need huggingface_hub: {install_command('share')}") from None
    return HfApi(endpoint=endpoint(), library_name="dream-gym", library_version=_version())


# --------------------------------------------------------------------------- errors


def _one_line(text: str, limit: int = 300) -> str:
    """A server's error text on one line, escaped and cut (the server wrote it)."""
    return printable(" ".join(str(text).split()), limit)


def _network_error_types() -> tuple[type[BaseException], ...]:
    """Transport errors of the HTTP client huggingface_hub uses (httpx2, httpx or requests)."""
    found: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module, names in (("httpx2", ("TransportError",)), ("httpx", ("TransportError",)),
                          ("requests", ("ConnectionError", "Timeout"))):
        loaded = sys.modules.get(module)
        for name in names:
            cls = getattr(getattr(loaded, "exceptions", loaded), name, None) if loaded is not None else None
            if isinstance(cls, type) and issubclass(cls, BaseException):
                found.append(cls)
    return tuple(found)


@contextmanager
def _hub_errors(hub: HubRemote, repo_id: str, what: str) -> Iterator[None]:
    """Turn the client's errors into one-line dream_gym errors naming the remote and the cause."""
    from huggingface_hub import errors as hf

    where = f"{hub.url} ({endpoint()})"
    try:
        yield
    except hf.OfflineModeIsEnabled:
        raise RemoteError(f"{what}: {where}: huggingface_hub is in offline mode (HF_HUB_OFFLINE is set); "
                          "unset it to reach the Hub") from None
    except (hf.RepositoryNotFoundError, hf.RevisionNotFoundError):
        raise DatasetNotFoundError(
            f"{what}: there is no dataset repository {repo_id} at {where} (or it is private and the token "
            "in HF_TOKEN / `hf auth login` cannot read it)"
        ) from None
    except hf.RemoteEntryNotFoundError as exc:
        raise DatasetNotFoundError(f"{what}: {where}: {_one_line(str(exc).splitlines()[0])}") from None
    except hf.HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        first = _one_line(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        if status == 401:
            cause = "not authenticated (HTTP 401): log in with `hf auth login` or set HF_TOKEN"
        elif status == 403:
            cause = f"forbidden (HTTP 403): the token cannot write to {repo_id.split('/')[0]}"
        elif status == 412:
            cause = "the repository changed while this upload was prepared (HTTP 412): run it again"
        elif status == 429:
            cause = "rate-limited by the Hub (HTTP 429): wait and run it again"
        else:
            cause = first
        raise RemoteError(f"{what}: {where}: {cause}") from None
    except _network_error_types() as exc:
        cause = _one_line(f"{type(exc).__name__}: {exc}")
        raise RemoteError(f"{what}: cannot reach {where}: {cause}; check the network connection and "
                          "HF_ENDPOINT; the local store was not changed") from None
    except hf.LocalEntryNotFoundError as exc:  # snapshot_download's wrapper of a connection error
        inner = exc.__cause__ or exc
        raise RemoteError(f"{what}: cannot reach {where}: {_one_line(f'{type(inner).__name__}: {inner}')}; "
                          "the local store was not changed") from None
    except hf.HFValidationError as exc:
        raise RemoteError(f"{what}: {where}: {_one_line(str(exc))}") from None


# --------------------------------------------------------------------------- reading a repository


def _versions(api: Any, repo_id: str, sha: str) -> list[int]:
    """Version folders at the repository's root (``v0``, ``v1``, ...), sorted."""
    from huggingface_hub.hf_api import RepoFolder

    found = []
    for entry in _bounded(api.list_repo_tree(repo_id, recursive=False, revision=sha, repo_type=REPO_TYPE),
                          f"the root of {repo_id}"):
        match = _VERSION_RE.match(entry.path)
        if isinstance(entry, RepoFolder) and match:
            found.append(int(match[1]))
    return sorted(found)


def _files(api: Any, repo_id: str, sha: str, version: int) -> dict[str, int]:
    """Every file of version folder ``vN`` with its size, by path relative to the folder."""
    from huggingface_hub.hf_api import RepoFile

    prefix = f"v{version}/"
    entries = api.list_repo_tree(repo_id, f"v{version}", recursive=True, revision=sha, repo_type=REPO_TYPE)
    return {
        entry.path[len(prefix):]: int(entry.size)
        for entry in _bounded(entries, f"{repo_id}/{prefix}")
        if isinstance(entry, RepoFile) and entry.path.startswith(prefix)
    }


def _bounded(entries: Any, what: str) -> Iterator[Any]:
    """``entries`` of a listing, refused past :data:`MAX_LISTED` (the listing follows the server's
    next-page links: one with no last page would never end)."""
    for count, entry in enumerate(entries, 1):
        if count > MAX_LISTED:
            raise DatasetError(f"{what}: the listing holds more than {MAX_LISTED:,} entries (limit); refused")
        yield entry


def _probe(api: Any) -> None:
    """One request without retries: with no network, fail at once (list_datasets retries for ~25 s)."""
    from huggingface_hub.utils import get_session

    get_session().head(api.endpoint, timeout=10)  # any answer will do


def _fetch(api: Any, repo_id: str, sha: str, path: str, workdir: Path, size: int) -> Path:
    """Fetch the repository's file ``path`` into ``workdir`` (at its path), at most ``size`` bytes:
    its size in the listing. The server's answer is read through a budget, not trusted: one that
    sends more than it listed, or sends it slower than :data:`MIN_BYTES_PER_S` on average after
    :data:`GRACE_S`, is cut off and the download refused (``hf_hub_download`` writes whatever
    arrives, for as long as it keeps arriving)."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    local = workdir / path
    local.parent.mkdir(parents=True, exist_ok=True)
    url = hf_hub_url(repo_id, path, repo_type=REPO_TYPE, revision=sha, endpoint=api.endpoint)
    deadline = time.monotonic() + GRACE_S + size / MIN_BYTES_PER_S
    headers = build_hf_headers(library_name="dream-gym")
    with get_session().stream("GET", url, headers=headers, follow_redirects=True, timeout=30) as response:
        if response.status_code >= 400:
            response.read()  # the error's body, for the message
        hf_raise_for_status(response)
        written = 0
        with open(local, "wb") as out:
            for chunk in response.iter_bytes():
                written += len(chunk)
                if written > size:
                    raise DatasetError(f"{repo_id}/{path}: the server sent more than the {size:,} bytes its listing "
                                       "gives; download refused")
                if time.monotonic() > deadline:
                    raise RemoteError(f"{repo_id}/{path}: {written:,} of {size:,} bytes came in the "
                                      f"{GRACE_S + size / MIN_BYTES_PER_S:.0f} s a file of its size is given "
                                      f"({GRACE_S:.0f} s, then {MIN_BYTES_PER_S // 1000:,} kB/s); download refused")
                out.write(chunk)
    return local


def _read_meta(url: str, local: Path, *, validate: bool = True) -> tuple[bytes, Any]:
    with open(local, "rb") as stream:
        return parse_dataset_json(url, stream, validate=validate)


def _check_meta_size(url: str, size: int | None) -> None:
    limit = max_line_bytes()
    if size is not None and size > limit:
        raise DatasetError(f"{url}: " + line_limit_problem(limit, "file") + "; download refused")


@dataclass
class _Repo:
    hub: HubRemote
    api: Any
    repo_id: str
    sha: str
    versions: list[int]


def _open_repo(hub: HubRemote, name: str, what: str) -> _Repo:
    api = _api()
    repo_id = hub.repo_id(name)
    with _hub_errors(hub, repo_id, what):
        sha = api.repo_info(repo_id, repo_type=REPO_TYPE).sha
        versions = _versions(api, repo_id, sha)
    return _Repo(hub, api, repo_id, str(sha), versions)


def _pick_version(repo: _Repo, ref: DatasetId | DatasetName) -> DatasetId:
    if isinstance(ref, DatasetName):
        if not repo.versions:
            raise DatasetNotFoundError(f"dataset {ref}: {repo.hub.location(repo.repo_id)} holds no version "
                                       "folder (v0/, v1/, ...)")
        return ref.version(repo.versions[-1])
    if ref.version not in repo.versions:
        held = ", ".join(f"v{v}" for v in repo.versions) or "none"
        raise DatasetNotFoundError(
            f"dataset {ref} is not at remote {repo.hub.url}: {repo.hub.location(repo.repo_id)} holds versions {held}"
        )
    return ref


def latest_version(name: DatasetName, remote: str) -> int:
    """The newest version of ``name`` at an ``hf://`` remote."""
    hub = parse_hub_remote(remote)
    repo = _open_repo(hub, name.name, f"newest version of {name}")
    return _pick_version(repo, name).version


# --------------------------------------------------------------------------- download


def download(ref: DatasetId | DatasetName, remote: str, *, overwrite: bool = False,
             skip_existing: bool = False) -> Dataset:
    """Fetch one version (``ref`` without a version: the newest) into the local store.

    ``skip_existing`` returns the local copy when that version is already there (``overwrite``
    replaces it; neither: :class:`FileExistsError`).
    """
    hub = parse_hub_remote(remote)
    repo = _open_repo(hub, ref.name, f"download of {ref}")
    did = _pick_version(repo, ref)
    check_not_shipped(did)
    target = local_path(did)
    if (target / DATASET_FILE).exists() and not overwrite:
        if skip_existing:
            return find_dataset(str(did))
        raise FileExistsError(f"dataset {did} is already in the local store at {target} {REPLACE_HINT}")
    source = hub.location(repo.repo_id, did.version)
    folder = f"v{did.version}"
    what = f"download of {did}"
    with _hub_errors(hub, repo.repo_id, what):
        sizes = _files(repo.api, repo.repo_id, repo.sha, did.version)
    meta_url = f"{source}/{DATASET_FILE}"
    if DATASET_FILE not in sizes:
        raise DatasetError(f"{meta_url}: missing; {source} is not a dream_gym dataset version")
    _check_meta_size(meta_url, sizes[DATASET_FILE])
    made = not target.parent.exists()
    target.parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f".download-{did.name}-v{did.version}.", dir=target.parent))
    try:
        with _hub_errors(hub, repo.repo_id, what):
            local_meta = _fetch(repo.api, repo.repo_id, repo.sha, f"{folder}/{DATASET_FILE}", workdir,
                                sizes[DATASET_FILE])
        meta = _read_meta(meta_url, local_meta)[1]  # format/version check before any world is fetched
        check_id(meta_url, meta, str(did))
        limit = max_decompressed_bytes()
        for rel in meta["files"]:
            safe_relative_path(meta_url, rel)
            if rel not in sizes:
                raise DatasetError(f"{source}/{rel}: listed in {DATASET_FILE} but not in the repository; download refused")
            if sizes[rel] > limit:
                raise DatasetError(f"{source}/{rel}: " + decompressed_limit_problem(limit, f"holds {sizes[rel]} bytes,")
                                   + "; download refused")
        with _hub_errors(hub, repo.repo_id, what), ThreadPoolExecutor(max_workers=8) as pool:
            fetches = [pool.submit(_fetch, repo.api, repo.repo_id, repo.sha, f"{folder}/{rel}", workdir, sizes[rel])
                       for rel in meta["files"]]
            try:
                for fetch in fetches:
                    fetch.result()
            except BaseException:  # the first refusal ends the download: the files not begun are not fetched
                for fetch in fetches:
                    fetch.cancel()
                raise
        staging = workdir / folder
        for rel, digest in meta["files"].items():
            actual = sha256_file(staging / rel)
            if actual != digest:
                raise DatasetError(
                    f"{source}/{rel}: sha256 mismatch (dataset.json says {digest}, the file has {actual}); "
                    "the remote copy was tampered with or corrupted, download refused"
                )
        listed = set(meta["files"]) | {DATASET_FILE}
        unlisted = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*")
                          if p.is_file() and p.relative_to(staging).as_posix() not in listed)
        if unlisted:
            raise DatasetError(f"{source}: fetched files not listed in dataset.json: {', '.join(unlisted)}")
        install_verified(source, staging, did, target, overwrite=overwrite)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if made:
            remove_if_empty(target.parent)  # the namespace's folder made for a download that failed
    return find_dataset(str(did))


# --------------------------------------------------------------------------- upload


@dataclass
class HubUpload:
    id: str
    location: str  # hf://datasets/OWNER/REPO/vN
    repo_url: str  # where the Hub shows the card
    commit_url: str
    commits: int
    files: int
    bytes: int

    def summary(self) -> str:
        size = f"{self.bytes / 1e6:.1f} MB" if self.bytes >= 100_000 else f"{self.bytes / 1e3:.1f} kB"
        return (f"uploaded {self.id} to {self.location} in {self.commits} commit ({self.files} files, {size}; "
                f"dataset card README.md at the repository root, {self.repo_url}): {self.commit_url}")


def upload(dataset_id: str, remote: str, *, overwrite: bool = False) -> HubUpload:
    """Publish a local (or shipped) dataset version to an ``hf://`` remote in one commit."""
    api = _api()  # first: without huggingface_hub this says which extra to install
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    did = parse_dataset_id(dataset_id)
    dataset = find_dataset(str(did))
    from dream_gym.datasets.store import verify_files

    verify_files(dataset.path, dataset.meta)  # a corrupt local copy is never published
    hub = parse_hub_remote(remote)
    repo_id = hub.repo_id(did.name)
    what = f"upload of {did}"
    folder = f"v{did.version}"
    location = hub.location(repo_id, did.version)
    with _hub_errors(hub, repo_id, what):
        api.create_repo(repo_id, repo_type=REPO_TYPE, exist_ok=True)
        sha = str(api.repo_info(repo_id, repo_type=REPO_TYPE).sha)
        versions = _versions(api, repo_id, sha)
    if did.version in versions and not overwrite:
        raise FileExistsError(f"{location} already holds dataset {did} {REPLACE_HINT}")
    others = [v for v in versions if v != did.version]
    card_meta, card_readme = dataset.meta, local_card(dataset)
    with tempfile.TemporaryDirectory(prefix=".hub-upload.") as tmp:
        if others:  # the repository's other versions must be this dataset's, and the card shows the newest
            newest = max(others)
            meta_url = f"{hub.location(repo_id, newest)}/{DATASET_FILE}"
            with _hub_errors(hub, repo_id, what):
                sizes = _files(api, repo_id, sha, newest)
                if DATASET_FILE not in sizes:
                    raise DatasetError(f"{meta_url}: missing; the repository is not a dream_gym dataset")
                _check_meta_size(meta_url, sizes[DATASET_FILE])
                newest_meta = _read_meta(meta_url, _fetch(api, repo_id, sha, f"v{newest}/{DATASET_FILE}", Path(tmp),
                                                            sizes[DATASET_FILE]),
                                         validate=False)[1]
            held = str(newest_meta.get("id", "")).rsplit("-v", 1)[0]
            if held != str(did.unversioned):
                raise DatasetError(
                    f"{hub.location(repo_id)} holds dataset {held or '(unknown)'}, not {did.unversioned}: a repository "
                    "holds the versions of one dataset; upload to hf://datasets/OWNER/OTHER-REPO instead"
                )
            if newest > did.version and isinstance(newest_meta, dict):
                card_meta, card_readme = newest_meta, None
                if CARD_FILE in sizes and sizes[CARD_FILE] <= max_line_bytes():
                    with _hub_errors(hub, repo_id, what):
                        fetched = _fetch(api, repo_id, sha, f"v{newest}/{CARD_FILE}", Path(tmp), sizes[CARD_FILE])
                    card_readme = fetched.read_text(encoding="utf-8", errors="replace")
        all_versions = sorted({*versions, did.version})
        remote_location = f"{SCHEME}{hub.namespace}" if hub.repo is None else hub.location(repo_id)
        card = dataset_card(card_meta, card_readme, all_versions, remote_location)
        operations: list[Any] = []
        if did.version in versions:  # --force: files of the old copy that the new one lacks are deleted
            with _hub_errors(hub, repo_id, what):
                old = _files(api, repo_id, sha, did.version)
            operations += [CommitOperationDelete(f"{folder}/{rel}") for rel in sorted(old)
                           if rel not in dataset.meta["files"] and rel != DATASET_FILE]
        total = 0
        for rel in [*dataset.meta["files"], DATASET_FILE]:
            path = dataset.path / rel
            total += path.stat().st_size
            operations.append(CommitOperationAdd(f"{folder}/{rel}", str(path)))
        operations.append(CommitOperationAdd(CARD_FILE, card.encode("utf-8")))
        verb = "Replace" if did.version in versions else "Add"
        with _hub_errors(hub, repo_id, what):
            info = api.create_commit(
                repo_id, operations, repo_type=REPO_TYPE, parent_commit=sha,
                commit_message=f"{verb} {did} ({len(dataset.world_names)} worlds)",
                commit_description=f"dream-gym worlds upload {did}: {len(dataset.meta['files']) + 1} files in "
                                   f"{folder}/ and the dataset card.",
            )
    return HubUpload(str(did), location, f"{api.endpoint}/datasets/{repo_id}", str(info.commit_url), 1,
                     len(dataset.meta["files"]) + 2, total + len(card.encode("utf-8")))


# --------------------------------------------------------------------------- list


def list_remote(remote: str) -> list[RemoteDataset]:
    """Every version of every dream_gym dataset at an ``hf://`` remote."""
    hub = parse_hub_remote(remote)
    api = _api()
    if hub.repo is not None:
        repo_ids = [f"{hub.namespace}/{hub.repo}"]
    else:
        with _hub_errors(hub, f"{hub.namespace}/*", f"listing of {remote}"):
            _probe(api)
            repo_ids = sorted(str(info.id) for info in _bounded(api.list_datasets(author=hub.namespace, filter=TAG),
                                                                 f"the datasets of {hub.namespace}"))
    found: list[RemoteDataset] = []
    with tempfile.TemporaryDirectory(prefix=".hub-list.") as tmp:
        from huggingface_hub.errors import HFValidationError
        from huggingface_hub.utils import validate_repo_id

        for repo_id in repo_ids:
            try:  # a name the client refuses (the server's listing is its own text) is one row, not the listing
                validate_repo_id(repo_id)
            except HFValidationError as exc:
                found.append(RemoteDataset("(unreadable)", printable(repo_id), "folder",
                                           f"error: {_one_line(str(exc))}"))
                continue
            with _hub_errors(hub, repo_id, f"listing of {remote}"):
                sha = str(api.repo_info(repo_id, repo_type=REPO_TYPE).sha)
                tree = api.list_repo_tree(repo_id, recursive=True, revision=sha, repo_type=REPO_TYPE)
                entries = {e.path: getattr(e, "size", None) for e in _bounded(tree, repo_id)}
            versions = sorted(int(m[1]) for p in entries if (m := _VERSION_RE.match(p)))
            for version in versions:
                location = hub.location(repo_id, version)
                path = f"v{version}/{DATASET_FILE}"
                try:
                    if path not in entries:
                        raise DatasetError(f"no {DATASET_FILE}")
                    _check_meta_size(f"{location}/{DATASET_FILE}", entries[path])
                    with _hub_errors(hub, repo_id, f"listing of {remote}"):
                        size = entries[path]
                        local = _fetch(api, repo_id, sha, path, Path(tmp) / repo_id,
                                       size if isinstance(size, int) else max_line_bytes())
                    meta = _read_meta(f"{location}/{DATASET_FILE}", local, validate=False)[1]
                    found.append(listed(meta, location))
                except (DatasetError, DatasetNotFoundError) as exc:
                    found.append(RemoteDataset("(unreadable)", location, "folder", f"error: {exc}"))
    return found
