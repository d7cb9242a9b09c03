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

# The limits are read where they live, in .repository: set them there (a test's monkeypatch), not here.
from dream_gym.datasets.hub.download import download, latest_version
from dream_gym.datasets.hub.listing import list_remote
from dream_gym.datasets.hub.repository import (
    GRACE_S,
    MAX_LISTED,
    MIN_BYTES_PER_S,
    SCHEME,
    HubRemote,
    endpoint,
    is_hub_remote,
    parse_hub_remote,
)
from dream_gym.datasets.hub.upload import HubUpload, upload

__all__ = [
    "GRACE_S", "MAX_LISTED", "MIN_BYTES_PER_S", "SCHEME", "HubRemote", "HubUpload", "download", "endpoint",
    "is_hub_remote", "latest_version", "list_remote", "parse_hub_remote", "upload",
]
