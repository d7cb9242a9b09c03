"""A local dataset version published to the Hub in one commit, with the dataset card the Hub
shows; made on the commit it read, so a commit landed meanwhile makes it fail instead of
overwriting."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dream_gym.datasets.hub.card import CARD_FILE, dataset_card, local_card
from dream_gym.datasets.hub.repository import (
    REPO_TYPE,
    SCHEME,
    check_meta_size,
    fetch_file,
    files_of,
    hub_api,
    hub_errors,
    parse_hub_remote,
    read_meta,
    versions_in,
)
from dream_gym.datasets.ids import parse_dataset_id
from dream_gym.datasets.store import (
    DATASET_FILE,
    REPLACE_HINT,
    DatasetError,
    find_dataset,
)
from dream_gym.infrastructure.limits import max_line_bytes


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
    api = hub_api()  # first: without huggingface_hub this says which extra to install
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
    with hub_errors(hub, repo_id, what):
        api.create_repo(repo_id, repo_type=REPO_TYPE, exist_ok=True)
        sha = str(api.repo_info(repo_id, repo_type=REPO_TYPE).sha)
        versions = versions_in(api, repo_id, sha)
    if did.version in versions and not overwrite:
        raise FileExistsError(f"{location} already holds dataset {did} {REPLACE_HINT}")
    others = [v for v in versions if v != did.version]
    card_meta, card_readme = dataset.meta, local_card(dataset)
    with tempfile.TemporaryDirectory(prefix=".hub-upload.") as tmp:
        if others:  # the repository's other versions must be this dataset's, and the card shows the newest
            newest = max(others)
            meta_url = f"{hub.location(repo_id, newest)}/{DATASET_FILE}"
            with hub_errors(hub, repo_id, what):
                sizes = files_of(api, repo_id, sha, newest)
                if DATASET_FILE not in sizes:
                    raise DatasetError(f"{meta_url}: missing; the repository is not a dream_gym dataset")
                check_meta_size(meta_url, sizes[DATASET_FILE])
                newest_meta = read_meta(meta_url, fetch_file(api, repo_id, sha, f"v{newest}/{DATASET_FILE}", Path(tmp),
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
                    with hub_errors(hub, repo_id, what):
                        fetched = fetch_file(api, repo_id, sha, f"v{newest}/{CARD_FILE}", Path(tmp), sizes[CARD_FILE])
                    card_readme = fetched.read_text(encoding="utf-8", errors="replace")
        all_versions = sorted({*versions, did.version})
        remote_location = f"{SCHEME}{hub.namespace}" if hub.repo is None else hub.location(repo_id)
        card = dataset_card(card_meta, card_readme, all_versions, remote_location)
        operations: list[Any] = []
        if did.version in versions:  # --force: files of the old copy that the new one lacks are deleted
            with hub_errors(hub, repo_id, what):
                old = files_of(api, repo_id, sha, did.version)
            operations += [CommitOperationDelete(f"{folder}/{rel}") for rel in sorted(old)
                           if rel not in dataset.meta["files"] and rel != DATASET_FILE]
        total = 0
        for rel in [*dataset.meta["files"], DATASET_FILE]:
            path = dataset.path / rel
            total += path.stat().st_size
            operations.append(CommitOperationAdd(f"{folder}/{rel}", str(path)))
        operations.append(CommitOperationAdd(CARD_FILE, card.encode("utf-8")))
        verb = "Replace" if did.version in versions else "Add"
        with hub_errors(hub, repo_id, what):
            info = api.create_commit(
                repo_id, operations, repo_type=REPO_TYPE, parent_commit=sha,
                commit_message=f"{verb} {did} ({len(dataset.world_names)} worlds)",
                commit_description=f"dream-gym worlds upload {did}: {len(dataset.meta['files']) + 1} files in "
                                   f"{folder}/ and the dataset card.",
            )
    return HubUpload(str(did), location, f"{api.endpoint}/datasets/{repo_id}", str(info.commit_url), 1,
                     len(dataset.meta["files"]) + 2, total + len(card.encode("utf-8")))
