"""Reading a dataset repository on the Hub: the ``hf://`` remote parsed, the client made, its
errors said in one line, listings and file fetches bounded (the server is not trusted to end what
it sends), the version a reference names picked."""

from __future__ import annotations

import importlib.metadata
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dream_gym.datasets.fetched import (
    RemoteError,
)
from dream_gym.datasets.ids import DatasetId, DatasetName
from dream_gym.datasets.store import (
    DatasetError,
    DatasetNotFoundError,
    parse_dataset_json,
)
from dream_gym.infrastructure.extras import install_command
from dream_gym.infrastructure.limits import (
    line_limit_problem,
    max_line_bytes,
)
from dream_gym.infrastructure.printable import printable

SCHEME = "hf://"
REPO_TYPE = "dataset"
#: The most entries one listing is read for (folders at a repository's root, files of a version,
#: repositories of a namespace): a server whose listing has no last page is cut off there.
MAX_LISTED = 100_000
#: The slowest a file may arrive, on average, after a grace of :data:`GRACE_S`: a server that
#: trickles a byte every few seconds (under the client's read timeout) is cut off.
MIN_BYTES_PER_S = 20_000
GRACE_S = 60.0
VERSION_RE = re.compile(r"^v(0|[1-9][0-9]*)$")
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


def hub_api() -> Any:
    try:
        from huggingface_hub import HfApi
    except ImportError:  # huggingface_hub is in the share extra
        raise RemoteError(f"hf:// remotes need huggingface_hub: {install_command('share')}") from None
    return HfApi(endpoint=endpoint(), library_name="dream-gym", library_version=_version())


# --------------------------------------------------------------------------- errors


def one_line(text: str, limit: int = 300) -> str:
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
def hub_errors(hub: HubRemote, repo_id: str, what: str) -> Iterator[None]:
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
        raise DatasetNotFoundError(f"{what}: {where}: {one_line(str(exc).splitlines()[0])}") from None
    except hf.HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        first = one_line(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
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
        cause = one_line(f"{type(exc).__name__}: {exc}")
        raise RemoteError(f"{what}: cannot reach {where}: {cause}; check the network connection and "
                          "HF_ENDPOINT; the local store was not changed") from None
    except hf.LocalEntryNotFoundError as exc:  # snapshot_download's wrapper of a connection error
        inner = exc.__cause__ or exc
        raise RemoteError(f"{what}: cannot reach {where}: {one_line(f'{type(inner).__name__}: {inner}')}; "
                          "the local store was not changed") from None
    except hf.HFValidationError as exc:
        raise RemoteError(f"{what}: {where}: {one_line(str(exc))}") from None


# --------------------------------------------------------------------------- reading a repository


def versions_in(api: Any, repo_id: str, sha: str) -> list[int]:
    """Version folders at the repository's root (``v0``, ``v1``, ...), sorted."""
    from huggingface_hub.hf_api import RepoFolder

    found = []
    for entry in bounded(api.list_repo_tree(repo_id, recursive=False, revision=sha, repo_type=REPO_TYPE),
                          f"the root of {repo_id}"):
        match = VERSION_RE.match(entry.path)
        if isinstance(entry, RepoFolder) and match:
            found.append(int(match[1]))
    return sorted(found)


def files_of(api: Any, repo_id: str, sha: str, version: int) -> dict[str, int]:
    """Every file of version folder ``vN`` with its size, by path relative to the folder."""
    from huggingface_hub.hf_api import RepoFile

    prefix = f"v{version}/"
    entries = api.list_repo_tree(repo_id, f"v{version}", recursive=True, revision=sha, repo_type=REPO_TYPE)
    return {
        entry.path[len(prefix):]: int(entry.size)
        for entry in bounded(entries, f"{repo_id}/{prefix}")
        if isinstance(entry, RepoFile) and entry.path.startswith(prefix)
    }


def bounded(entries: Any, what: str) -> Iterator[Any]:
    """``entries`` of a listing, refused past :data:`MAX_LISTED` (the listing follows the server's
    next-page links: one with no last page would never end)."""
    for count, entry in enumerate(entries, 1):
        if count > MAX_LISTED:
            raise DatasetError(f"{what}: the listing holds more than {MAX_LISTED:,} entries (limit); refused")
        yield entry


def probe(api: Any) -> None:
    """One request without retries: with no network, fail at once (list_datasets retries for ~25 s)."""
    from huggingface_hub.utils import get_session

    get_session().head(api.endpoint, timeout=10)  # any answer will do


def fetch_file(api: Any, repo_id: str, sha: str, path: str, workdir: Path, size: int) -> Path:
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


def read_meta(url: str, local: Path, *, validate: bool = True) -> tuple[bytes, Any]:
    with open(local, "rb") as stream:
        return parse_dataset_json(url, stream, validate=validate)


def check_meta_size(url: str, size: int | None) -> None:
    limit = max_line_bytes()
    if size is not None and size > limit:
        raise DatasetError(f"{url}: " + line_limit_problem(limit, "file") + "; download refused")


@dataclass
class Repo:
    hub: HubRemote
    api: Any
    repo_id: str
    sha: str
    versions: list[int]


def open_repo(hub: HubRemote, name: str, what: str) -> Repo:
    api = hub_api()
    repo_id = hub.repo_id(name)
    with hub_errors(hub, repo_id, what):
        sha = api.repo_info(repo_id, repo_type=REPO_TYPE).sha
        versions = versions_in(api, repo_id, sha)
    return Repo(hub, api, repo_id, str(sha), versions)


def pick_version(repo: Repo, ref: DatasetId | DatasetName) -> DatasetId:
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
