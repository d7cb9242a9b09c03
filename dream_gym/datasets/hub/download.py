"""A dataset version fetched from the Hub into the local store: ``dataset.json`` first (its
format checked), then the files it lists, eight at a time, each checked against its sha256 before
anything enters the store."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor

from dream_gym.datasets.fetched import (
    check_id,
    install_verified,
    local_copy,
)
from dream_gym.datasets.hub.repository import (
    check_meta_size,
    fetch_file,
    files_of,
    hub_errors,
    open_repo,
    parse_hub_remote,
    pick_version,
    read_meta,
)
from dream_gym.datasets.ids import DatasetId, DatasetName
from dream_gym.datasets.store import (
    DATASET_FILE,
    Dataset,
    DatasetError,
    find_dataset,
    local_path,
    remove_if_empty,
    safe_relative_path,
    staging_folder,
)
from dream_gym.infrastructure.limits import decompressed_limit_problem, max_decompressed_bytes
from dream_gym.world.tree import sha256_file


def latest_version(name: DatasetName, remote: str) -> int:
    """The newest version of ``name`` at an ``hf://`` remote."""
    hub = parse_hub_remote(remote)
    repo = open_repo(hub, name.name, f"newest version of {name}")
    return pick_version(repo, name).version


def download(ref: DatasetId | DatasetName, remote: str, *, overwrite: bool = False,
             skip_existing: bool = False) -> Dataset:
    """Fetch one version (``ref`` without a version: the newest) into the local store.

    ``skip_existing`` returns the local copy when that version is already there (``overwrite``
    replaces it; neither: :class:`FileExistsError`).
    """
    hub = parse_hub_remote(remote)
    repo = open_repo(hub, ref.name, f"download of {ref}")
    did = pick_version(repo, ref)
    if (kept := local_copy(did, overwrite=overwrite, skip_existing=skip_existing)) is not None:
        return kept
    target = local_path(did)
    source = hub.location(repo.repo_id, did.version)
    folder = f"v{did.version}"
    what = f"download of {did}"
    with hub_errors(hub, repo.repo_id, what):
        sizes = files_of(repo.api, repo.repo_id, repo.sha, did.version)
    meta_url = f"{source}/{DATASET_FILE}"
    if DATASET_FILE not in sizes:
        raise DatasetError(f"{meta_url}: missing; {source} is not a dream_gym dataset version")
    check_meta_size(meta_url, sizes[DATASET_FILE])
    workdir, made = staging_folder(did, "download-")
    try:
        with hub_errors(hub, repo.repo_id, what):
            local_meta = fetch_file(repo.api, repo.repo_id, repo.sha, f"{folder}/{DATASET_FILE}", workdir,
                                sizes[DATASET_FILE])
        meta = read_meta(meta_url, local_meta)[1]  # format/version check before any world is fetched
        check_id(meta_url, meta, str(did))
        limit = max_decompressed_bytes()
        for rel in meta["files"]:
            safe_relative_path(meta_url, rel)
            if rel not in sizes:
                raise DatasetError(f"{source}/{rel}: listed in {DATASET_FILE} but not in the repository; download refused")
            if sizes[rel] > limit:
                raise DatasetError(f"{source}/{rel}: " + decompressed_limit_problem(limit, f"holds {sizes[rel]} bytes,")
                                   + "; download refused")
        with hub_errors(hub, repo.repo_id, what), ThreadPoolExecutor(max_workers=8) as pool:
            fetches = [pool.submit(fetch_file, repo.api, repo.repo_id, repo.sha, f"{folder}/{rel}", workdir, sizes[rel])
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
