"""A small stand-in for the Hugging Face Hub's HTTP API, for tests with the real ``huggingface_hub``.

It serves dataset repositories from memory on ``127.0.0.1`` (stdlib ``http.server`` in a thread)
and implements only the endpoints ``huggingface_hub`` 2.x calls for creating a repository,
committing files, listing and downloading them:

=========================================================  =========================================
``POST /api/repos/create``                                 create_repo (409 when it exists)
``GET  /api/datasets?author=&filter=``                     list_datasets (tags from the card)
``GET  /api/datasets/{repo}[/revision/{rev}]``              repo_info / dataset_info (``sha``)
``GET  /api/datasets/{repo}/tree/{rev}[/{path}]``           list_repo_tree (``recursive``, paged by
                                                           ``Link: <...>; rel="next"``)
``POST /api/datasets/{repo}/preupload/{rev}``              upload modes: ``lfs`` for binary samples,
                                                           ``.gz`` files and files over 5 MB
``POST /api/validate-yaml``                                the README.md front matter (license ids,
                                                           task categories, lists of strings)
``POST /datasets/{repo}.git/info/lfs/objects/batch``       LFS batch, ``basic`` transfer only
``PUT  /lfs-objects/{sha256}``, ``POST /lfs-verify``       the LFS upload (sha256 and size checked)
``POST /api/datasets/{repo}/commit/{rev}``                 the NDJSON commit (``header``, ``file``,
                                                           ``lfsFile``, ``deletedFile``,
                                                           ``deletedFolder``; ``parentCommit`` -> 412)
``HEAD|GET /datasets/{repo}/resolve/{rev}/{path}``         files, with ``ETag`` (git blob sha1, or
                                                           the sha256 of an LFS file),
                                                           ``X-Repo-Commit``, ``Content-Length``
=========================================================  =========================================

Errors carry the Hub's ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``)
and ``X-Error-Message`` headers, so the client raises its own typed errors. The server never
advertises Xet storage (no ``X-Xet-*`` headers, no xet token route): downloads go over plain HTTP,
and uploads of LFS files need ``HF_HUB_DISABLE_XET=1`` on the client (it picks Xet by itself when
``hf_xet`` is installed). Writes need ``Authorization: Bearer <token>`` when ``token`` is set.

``HubServer.commits`` records every commit made through the commit endpoint (one per call), and
``HubServer.requests`` every request line, so tests can count them. ``tamper`` changes a stored
file without a commit; ``before_commit`` (with ``commit_directly``) lands another writer's commit
just before one arrives; ``stop`` also cuts kept-alive connections, so the next request is refused.
``streams`` makes the server hostile: a file path there (``v0/w/nodes.jsonl``) is answered, on
GET, by the chunks its callable yields (chunked transfer, no length): more than the listing gives,
without end, or a byte every few seconds.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import yaml

LFS_THRESHOLD = 5 * 1024 * 1024
HUB_LICENSES = {
    "apache-2.0", "mit", "openrail", "bsd-2-clause", "bsd-3-clause", "cc0-1.0", "cc-by-4.0",
    "cc-by-sa-4.0", "cc-by-nc-4.0", "cc-by-nc-sa-4.0", "cc-by-nd-4.0", "cc-by-nc-nd-4.0", "cc-by-3.0",
    "cc-by-sa-3.0", "gpl-3.0", "lgpl-3.0", "agpl-3.0", "mpl-2.0", "odc-by", "odbl", "pddl", "unlicense",
    "other", "unknown",
}
HUB_TASK_CATEGORIES = {
    "reinforcement-learning", "robotics", "tabular-classification", "tabular-regression",
    "text-generation", "time-series-forecasting", "other",
}
HUB_SIZE_CATEGORIES = {"n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M", "10M<n<100M",
                       "100M<n<1B", "1B<n<10B", "10B<n<100B", "100B<n<1T", "n>1T"}


def git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


@dataclass
class Blob:
    data: bytes
    lfs: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def tree_entry(self, path: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "file", "path": path, "size": len(self.data)}
        if self.lfs:
            pointer = lfs_pointer(self.sha256, len(self.data))
            entry["oid"] = git_blob_oid(pointer)
            entry["lfs"] = {"oid": self.sha256, "size": len(self.data), "pointerSize": len(pointer)}
        else:
            entry["oid"] = git_blob_oid(self.data)
        return entry

    @property
    def etag(self) -> str:
        return self.sha256 if self.lfs else git_blob_oid(self.data)


@dataclass
class Commit:
    oid: str
    parent: str | None
    summary: str
    files: dict[str, Blob]
    operations: int = 0


@dataclass
class Repo:
    id: str
    commits: list[Commit] = field(default_factory=list)
    main: str = ""

    def commit(self, rev: str) -> Commit | None:
        oid = self.main if rev == "main" else rev
        return next((c for c in self.commits if c.oid == oid), None)

    @property
    def head(self) -> Commit:
        found = self.commit("main")
        assert found is not None
        return found


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, repo_commit: str | None = None,
                 payload: dict[str, Any] | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.repo_commit = status, message, code, repo_commit
        self.payload = payload


_REPO = r"(?P<ns>[^/]+)/(?P<name>[^/]+)"
ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("POST", re.compile(r"^/api/repos/create$"), "create_repo"),
    ("POST", re.compile(r"^/api/validate-yaml$"), "validate_yaml"),
    ("GET", re.compile(r"^/api/datasets$"), "list_datasets"),
    ("GET", re.compile(rf"^/api/datasets/{_REPO}$"), "repo_info"),
    ("GET", re.compile(rf"^/api/datasets/{_REPO}/revision/(?P<rev>[^/]+)$"), "repo_info"),
    ("GET", re.compile(rf"^/api/datasets/{_REPO}/tree/(?P<rev>[^/]+)(?:/(?P<path>.+))?$"), "tree"),
    ("POST", re.compile(rf"^/api/datasets/{_REPO}/preupload/(?P<rev>[^/]+)$"), "preupload"),
    ("POST", re.compile(rf"^/api/datasets/{_REPO}/commit/(?P<rev>[^/]+)$"), "commit"),
    ("POST", re.compile(rf"^/datasets/{_REPO}\.git/info/lfs/objects/batch$"), "lfs_batch"),
    ("PUT", re.compile(r"^/lfs-objects/(?P<oid>[0-9a-f]{64})$"), "lfs_put"),
    ("POST", re.compile(r"^/lfs-verify$"), "lfs_verify"),
    ("GET", re.compile(rf"^/datasets/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"), "resolve"),
    ("HEAD", re.compile(rf"^/datasets/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"), "resolve"),
]


class HubServer:
    """The in-memory Hub. ``with HubServer() as hub:`` serves on ``hub.endpoint`` until the block ends."""

    def __init__(self, *, token: str | None = "hf_test_token", page_size: int = 1000):
        self.token = token
        self.page_size = page_size
        self.repos: dict[str, Repo] = {}
        self.lfs_objects: dict[str, bytes] = {}
        self.commits: list[tuple[str, str, str, int]] = []  # (repo id, oid, summary, operations)
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.RLock()
        self.before_commit: Any = None  # called with the repo before a commit is applied (a concurrent writer)
        self.streams: dict[str, Any] = {}  # file path -> callable yielding the GET body's chunks (hostile)
        self._counter = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.endpoint = ""

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> HubServer:
        server = self

        class Handler(_Handler):
            hub = server

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        # a short poll: stop() waits for the serving loop to look up (0.5 s by default)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="hub-server",
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close every connection, kept-alive ones included (the next request fails)."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd.close_connections()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ inspection and tampering

    def commits_to(self, repo_id: str) -> list[tuple[str, str, str, int]]:
        return [c for c in self.commits if c[0] == repo_id]

    def files(self, repo_id: str, rev: str = "main") -> dict[str, bytes]:
        with self.lock:
            commit = self.repos[repo_id].commit(rev)
            assert commit is not None
            return {path: blob.data for path, blob in commit.files.items()}

    def commit_directly(self, repo: Repo, path: str, data: bytes, summary: str = "someone else's commit") -> None:
        """A commit made by another writer (not through the HTTP API, not counted in ``commits``)."""
        files = {**repo.head.files, path: Blob(data, False)}
        commit = Commit(self._new_oid(repo.id), repo.main, summary, files, 1)
        repo.commits.append(commit)
        repo.main = commit.oid

    def tamper(self, repo_id: str, path: str, data: bytes) -> None:
        """Change a stored file in place, without a commit (storage corrupted, or a server that lies)."""
        with self.lock:
            self.repos[repo_id].head.files[path].data = data

    # ------------------------------------------------------------------ helpers

    def _new_oid(self, seed: str) -> str:
        self._counter += 1
        return hashlib.sha1(f"{seed}:{self._counter}:{time.time_ns()}".encode()).hexdigest()

    def _repo(self, ns: str, name: str) -> Repo:
        repo = self.repos.get(f"{ns}/{name}")
        if repo is None:
            raise HubError(404, "Repository not found", "RepoNotFound")
        return repo

    def _commit(self, repo: Repo, rev: str) -> Commit:
        commit = repo.commit(rev)
        if commit is None:
            raise HubError(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        return commit

    def _check_write(self, headers: Any) -> None:
        if self.token is None:
            return
        auth = headers.get("Authorization", "")
        if auth != f"Bearer {self.token}":
            raise HubError(401, "Invalid credentials in Authorization header")

    # ------------------------------------------------------------------ endpoints

    def create_repo(self, req: _Request) -> Any:
        self._check_write(req.headers)
        body = req.json()
        if body.get("type") != "dataset":
            raise HubError(400, "this test server only holds dataset repositories")
        repo_id = f"{body.get('organization')}/{body['name']}"
        if repo_id in self.repos:
            raise HubError(409, "You already created this dataset repo",
                           payload={"error": "You already created this dataset repo",
                                    "url": f"{self.endpoint}/datasets/{repo_id}"})
        attributes = b"*.gz filter=lfs diff=lfs merge=lfs -text\n"
        first = Commit(self._new_oid(repo_id), None, "initial commit", {".gitattributes": Blob(attributes, False)})
        self.repos[repo_id] = Repo(repo_id, [first], first.oid)
        return {"url": f"{self.endpoint}/datasets/{repo_id}", "name": repo_id}

    def validate_yaml(self, req: _Request) -> Any:
        content = req.json().get("content", "")
        errors = [{"message": m} for m in front_matter_problems(content)]
        if errors:
            raise HubError(400, "Invalid metadata", payload={"errors": errors, "warnings": []})
        return {"errors": [], "warnings": []}

    def list_datasets(self, req: _Request) -> Any:
        author = req.query.get("author", [None])[0]
        wanted = req.query.get("filter", [])
        found = []
        for repo_id, repo in sorted(self.repos.items()):
            if author is not None and repo_id.split("/")[0] != author:
                continue
            tags = card_tags(repo.head)
            if any(tag not in tags for tag in wanted):
                continue
            found.append({"id": repo_id, "_id": repo_id, "author": repo_id.split("/")[0], "sha": repo.main,
                          "private": False, "tags": tags, "downloads": 0, "likes": 0})
        return found

    def repo_info(self, req: _Request) -> Any:
        repo = self._repo(req.params["ns"], req.params["name"])
        commit = self._commit(repo, unquote(req.params.get("rev") or "main"))
        return {"id": repo.id, "_id": repo.id, "author": repo.id.split("/")[0], "sha": commit.oid,
                "private": False, "disabled": False, "gated": False, "downloads": 0, "likes": 0,
                "tags": card_tags(commit), "siblings": [{"rfilename": p} for p in sorted(commit.files)],
                "lastModified": "2026-01-01T00:00:00.000Z", "createdAt": "2026-01-01T00:00:00.000Z"}

    def tree(self, req: _Request) -> tuple[Any, dict[str, str]]:
        repo = self._repo(req.params["ns"], req.params["name"])
        commit = self._commit(repo, unquote(req.params["rev"]))
        base = unquote(req.params.get("path") or "").strip("/")
        recursive = req.query.get("recursive", ["false"])[0].lower() == "true"
        prefix = f"{base}/" if base else ""
        if base and not any(p.startswith(prefix) for p in commit.files):
            raise HubError(404, f"{base} does not exist on {commit.oid}", "EntryNotFound", commit.oid)
        entries: dict[str, dict[str, Any]] = {}
        for path in sorted(commit.files):
            if not path.startswith(prefix):
                continue
            parts = path[len(prefix):].split("/")
            for depth in range(1, len(parts)):
                folder = prefix + "/".join(parts[:depth])
                if recursive or depth == 1:
                    entries.setdefault(folder, {"type": "directory", "path": folder, "size": 0,
                                                "oid": hashlib.sha1(folder.encode()).hexdigest()})
            if recursive or len(parts) == 1:
                entries[path] = commit.files[path].tree_entry(path)
        listing = [entries[k] for k in sorted(entries)]
        start = int(req.query.get("cursor", ["0"])[0])
        page = listing[start:start + self.page_size]
        headers = {}
        if start + self.page_size < len(listing):
            rest = f"recursive={str(recursive).lower()}&cursor={start + self.page_size}"
            headers["Link"] = f'<{self.endpoint}{req.path}?{rest}>; rel="next"'
        return page, headers

    def preupload(self, req: _Request) -> Any:
        self._check_write(req.headers)
        repo = self._repo(req.params["ns"], req.params["name"])
        commit = self._commit(repo, unquote(req.params["rev"]))
        files = []
        for item in req.json()["files"]:
            sample = base64.b64decode(item["sample"])
            lfs = item["size"] > LFS_THRESHOLD or b"\x00" in sample or item["path"].endswith(".gz")
            existing = commit.files.get(item["path"])
            oid = None if existing is None else (existing.sha256 if existing.lfs else git_blob_oid(existing.data))
            files.append({"path": item["path"], "uploadMode": "lfs" if lfs else "regular",
                          "shouldIgnore": False, "oid": oid})
        return {"files": files, "commitOid": commit.oid}

    def lfs_batch(self, req: _Request) -> Any:
        self._check_write(req.headers)
        self._repo(req.params["ns"], req.params["name"])
        body = req.json()
        if body.get("operation") != "upload" or "basic" not in body.get("transfers", ["basic"]):
            raise HubError(400, "only basic LFS uploads are implemented")
        objects = []
        for obj in body["objects"]:
            entry: dict[str, Any] = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
            if obj["oid"] not in self.lfs_objects:
                entry["actions"] = {
                    "upload": {"href": f"{self.endpoint}/lfs-objects/{obj['oid']}", "header": {}},
                    "verify": {"href": f"{self.endpoint}/lfs-verify", "header": {}},
                }
            objects.append(entry)
        return {"transfer": "basic", "objects": objects}

    def lfs_put(self, req: _Request) -> Any:
        data = req.body
        if hashlib.sha256(data).hexdigest() != req.params["oid"]:
            raise HubError(400, "LFS object does not match its sha256")
        self.lfs_objects[req.params["oid"]] = data
        return {}

    def lfs_verify(self, req: _Request) -> Any:
        body = req.json()
        data = self.lfs_objects.get(body["oid"])
        if data is None or len(data) != body["size"]:
            raise HubError(404, f"LFS object {body['oid']} was not uploaded")
        return {"success": True}

    def commit(self, req: _Request) -> Any:
        self._check_write(req.headers)
        repo = self._repo(req.params["ns"], req.params["name"])
        rev = unquote(req.params["rev"])
        if rev != "main":
            raise HubError(400, "this test server only commits to main")
        lines = [json.loads(line) for line in req.body.splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "the commit payload must start with a header line")
        header = lines[0]["value"]
        if self.before_commit is not None:
            self.before_commit(repo)
        parent = repo.head
        if header.get("parentCommit") not in (None, parent.oid):
            raise HubError(412, "A commit has happened since. Please refresh and try again.")
        files = dict(parent.files)
        for line in lines[1:]:
            key, value = line["key"], line["value"]
            path = value["path"]
            if key == "file":
                files[path] = Blob(base64.b64decode(value["content"]), False)
            elif key == "lfsFile":
                data = self.lfs_objects.get(value["oid"])
                if data is None:
                    raise HubError(422, f"LFS object {value['oid']} for {path} was never uploaded")
                files[path] = Blob(data, True)
            elif key == "deletedFile":
                if path not in files:
                    raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
                del files[path]
            elif key == "deletedFolder":
                prefix = path.rstrip("/") + "/"
                files = {p: b for p, b in files.items() if not p.startswith(prefix)}
            else:
                raise HubError(400, f"unknown commit operation {key!r}")
        commit = Commit(self._new_oid(repo.id), parent.oid, header.get("summary", ""), files, len(lines) - 1)
        repo.commits.append(commit)
        repo.main = commit.oid
        self.commits.append((repo.id, commit.oid, commit.summary, commit.operations))
        return {"success": True, "commitOid": commit.oid, "pullRequestUrl": None, "hookOutput": "",
                "commitUrl": f"{self.endpoint}/datasets/{repo.id}/commit/{commit.oid}"}

    def resolve(self, req: _Request) -> tuple[bytes, dict[str, str]]:
        repo = self._repo(req.params["ns"], req.params["name"])
        commit = self._commit(repo, unquote(req.params["rev"]))
        path = unquote(req.params["path"])
        blob = commit.files.get(path)
        if blob is None:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound", commit.oid)
        headers = {"ETag": f'"{blob.etag}"', "X-Repo-Commit": commit.oid, "Accept-Ranges": "bytes",
                   "Content-Type": "application/octet-stream"}
        return blob.data, headers


def card_front_matter(commit: Commit) -> dict[str, Any]:
    readme = commit.files.get("README.md")
    if readme is None:
        return {}
    text = readme.data.decode("utf-8", "replace")
    match = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    loaded = yaml.safe_load(match.group(1)) if match else None
    return loaded if isinstance(loaded, dict) else {}


def card_tags(commit: Commit) -> list[str]:
    meta = card_front_matter(commit)
    tags = [str(t) for t in meta.get("tags") or []]
    for key in ("task_categories", "size_categories"):
        tags += [f"{key}:{value}" for value in meta.get(key) or []]
    if meta.get("license"):
        tags.append(f"license:{meta['license']}")
    return tags


def front_matter_problems(content: str) -> list[str]:
    """What the Hub would refuse in a card's YAML front matter (the subset this server checks)."""
    if not content.startswith("---\n"):
        return []  # no metadata: the Hub only warns
    match = re.match(r"^---\n(.*?)\n---\n", content, re.S)
    if match is None:
        return ["the YAML front matter is not closed by a '---' line"]
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        return [f"invalid YAML: {exc}"]
    if not isinstance(meta, dict):
        return ["the YAML front matter must be a mapping"]
    problems = []
    if meta.get("license") is not None and meta["license"] not in HUB_LICENSES:
        problems.append(f'"license" must be a license identifier, got {meta["license"]!r}')
    for key, allowed in (("task_categories", HUB_TASK_CATEGORIES), ("size_categories", HUB_SIZE_CATEGORIES)):
        values = meta.get(key)
        if values is None:
            continue
        if not isinstance(values, list) or any(v not in allowed for v in values):
            problems.append(f'"{key}" must be a list of known values, got {values!r}')
    tags = meta.get("tags")
    if tags is not None and (not isinstance(tags, list) or not all(isinstance(t, str) for t in tags)):
        problems.append('"tags" must be a list of strings')
    if "pretty_name" in meta and not isinstance(meta["pretty_name"], str):
        problems.append('"pretty_name" must be a string')
    return problems


@dataclass
class _Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: Any
    body: bytes
    params: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


class _Server(ThreadingHTTPServer):
    """Keeps the open connections, so that stopping the server also cuts kept-alive ones."""

    daemon_threads = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self.connections_lock:
            connections, self.connections = list(self.connections), set()
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            connection.close()


class _Handler(BaseHTTPRequestHandler):
    hub: HubServer
    protocol_version = "HTTP/1.1"
    # a response is written as headers then body: with Nagle's algorithm the body waits for the
    # client's delayed acknowledgement of the headers (tens of ms a request on kept-alive connections)
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return b"".join(self._chunks())
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _chunks(self) -> Iterator[bytes]:
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline().strip():  # trailers
                    pass
                return
            yield self.rfile.read(size)
            self.rfile.readline()

    def _dispatch(self, method: str) -> None:
        split = urlsplit(self.path)
        body = self._read_body() if method in ("POST", "PUT") else b""
        hub = self.hub
        with hub.lock:
            hub.requests.append((method, split.path))
        resolved = re.search(r"/resolve/[^/]+/(.+)$", split.path)
        if method == "GET" and resolved and unquote(resolved.group(1)) in hub.streams:
            self._stream(hub.streams[unquote(resolved.group(1))]())
            return
        for route_method, pattern, name in ROUTES:
            match = pattern.match(split.path) if route_method == method else None
            if match is None:
                continue
            params = {k: v for k, v in match.groupdict().items() if v is not None}
            request = _Request(method, split.path, parse_qs(split.query), self.headers, body, params)
            try:
                with hub.lock:
                    result = getattr(hub, name)(request)
            except HubError as exc:
                self._error(exc)
                return
            headers: dict[str, str] = {}
            if isinstance(result, tuple):
                result, headers = result
            if isinstance(result, bytes):
                self._send(200, result, headers, head=method == "HEAD")
            else:
                self._send(200, json.dumps(result).encode(), {"Content-Type": "application/json", **headers})
            return
        self._error(HubError(404, f"this test server does not implement {method} {split.path}"))

    def _error(self, exc: HubError) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": quote(exc.message, safe=" .,:;'/-_()")}
        if exc.code:
            headers["X-Error-Code"] = exc.code
        if exc.repo_commit:
            headers["X-Repo-Commit"] = exc.repo_commit
        payload = exc.payload or {"error": exc.message}
        self._send(exc.status, json.dumps(payload).encode(), headers, head=self.command == "HEAD")

    def _stream(self, chunks: Iterator[bytes]) -> None:
        """A body of unknown length, chunk by chunk, until the chunks end or the client goes."""
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for chunk in chunks:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def _send(self, status: int, body: bytes, headers: dict[str, str], *, head: bool = False) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)
