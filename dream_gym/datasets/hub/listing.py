"""Every version of every dream_gym dataset at an ``hf://`` remote, one row each; a repository
or version that cannot be read is a row saying why, not the end of the listing."""

from __future__ import annotations

import tempfile
from pathlib import Path

from dream_gym.datasets.fetched import (
    RemoteDataset,
    listed,
)
from dream_gym.datasets.hub.card import TAG
from dream_gym.datasets.hub.repository import (
    REPO_TYPE,
    VERSION_RE,
    bounded,
    check_meta_size,
    fetch_file,
    hub_api,
    hub_errors,
    one_line,
    parse_hub_remote,
    probe,
    read_meta,
)
from dream_gym.datasets.store import (
    DATASET_FILE,
    DatasetError,
    DatasetNotFoundError,
)
from dream_gym.infrastructure.limits import max_line_bytes
from dream_gym.infrastructure.printable import printable


def list_remote(remote: str) -> list[RemoteDataset]:
    """Every version of every dream_gym dataset at an ``hf://`` remote."""
    hub = parse_hub_remote(remote)
    api = hub_api()
    if hub.repo is not None:
        repo_ids = [f"{hub.namespace}/{hub.repo}"]
    else:
        with hub_errors(hub, f"{hub.namespace}/*", f"listing of {remote}"):
            probe(api)
            repo_ids = sorted(str(info.id) for info in bounded(api.list_datasets(author=hub.namespace, filter=TAG),
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
                                           f"error: {one_line(str(exc))}"))
                continue
            with hub_errors(hub, repo_id, f"listing of {remote}"):
                sha = str(api.repo_info(repo_id, repo_type=REPO_TYPE).sha)
                tree = api.list_repo_tree(repo_id, recursive=True, revision=sha, repo_type=REPO_TYPE)
                entries = {e.path: getattr(e, "size", None) for e in bounded(tree, repo_id)}
            versions = sorted(int(m[1]) for p in entries if (m := VERSION_RE.match(p)))
            for version in versions:
                location = hub.location(repo_id, version)
                path = f"v{version}/{DATASET_FILE}"
                try:
                    if path not in entries:
                        raise DatasetError(f"no {DATASET_FILE}")
                    check_meta_size(f"{location}/{DATASET_FILE}", entries[path])
                    with hub_errors(hub, repo_id, f"listing of {remote}"):
                        size = entries[path]
                        local = fetch_file(api, repo_id, sha, path, Path(tmp) / repo_id,
                                       size if isinstance(size, int) else max_line_bytes())
                    meta = read_meta(f"{location}/{DATASET_FILE}", local, validate=False)[1]
                    found.append(listed(meta, location))
                except (DatasetError, DatasetNotFoundError) as exc:
                    found.append(RemoteDataset("(unreadable)", location, "folder", f"error: {exc}"))
    return found
