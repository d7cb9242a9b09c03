"""Secrets never reach records or prompts: secret values replaced by ``[redacted:NAME]``.

A second layer of defence. The guarantee is that untrusted code (candidates, LLM-written policy
files) runs without secrets in its environment and cannot read them; this module only makes
sure that a secret which leaks anyway (an exception message, a printed value, an LLM reply that
quotes it) is not written to disk, printed by the CLI or sent back to an LLM. It is best-effort:
a program that computes a secret and emits it in an encoding not listed below gets it through.

What counts as a secret (:func:`secret_values`):

* the value of every environment variable whose name contains ``KEY``, ``TOKEN``, ``SECRET``,
  ``PASSWORD``, ``PASSWD``, ``CREDENTIAL``, ``AUTH``, ``PRIVATE``, ``COOKIE``, ``SESSION`` or
  ``WEBHOOK``, or ends with ``_PAT`` or ``_DSN`` (case-insensitive), so ``OPENAI_API_KEY``,
  ``HF_TOKEN``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
  ``GITHUB_TOKEN``, ``PGPASSWORD`` ...; a few well-known names that match but hold no secret
  (``SSH_AUTH_SOCK``, ``XAUTHORITY``, ``XDG_SESSION_*``, ``TOKENIZERS_PARALLELISM`` ...) are not;
* the password of any environment value that is a URL with credentials
  (``DATABASE_URL=postgres://user:pw@host``); a ``*_API_BASE`` without credentials is an address,
  not a secret;
* values given to :func:`register_secret` (the LLM client registers an explicit ``api_key``).

Values shorter than :data:`MIN_LENGTH` characters are ignored (they would mangle ordinary text);
a value is also taken without surrounding whitespace, and each long line of a multi-line value
(a PEM key) on its own.

What is caught, each replaced by ``[redacted:NAME]``: the value itself; reversed; ROT13;
hex (lower and upper case); URL-quoted (``quote`` and ``quote_plus``); base64, standard and
URL-safe, at each of the three byte alignments (so the value base64-encoded inside a longer
text is caught too; the one or two characters at each end that mix in neighbouring bytes are
left); and the value with up to three non-alphanumeric characters between any two of its
characters (``s k - t e s t``, ``sk-te_st-ab``). Not caught: a part of the value, other encodings
(base32, a list of byte values, XOR ...), compositions (base64 of the reversed value), mixed-case
hex, or a value split further apart.

The matchers are built once per process and rebuilt when ``os.environ`` changes (the check is
one comparison of the environment with a snapshot). Measured: 60-170 µs per 10 KB record with
5 secrets in the environment, under 10 µs for a small record (a quick search of each string's
letters and digits rules out most texts before a regex runs); without secrets in the environment
:func:`redact_value` looks only for keys of a known shape (:data:`KEY_SHAPES`, below: about 60 µs per
10 KB of code, most of it the test for their prefixes) and returns its argument itself when none is
there.

This module imports nothing of dream_gym (every layer may use it).
"""

from __future__ import annotations

import base64
import codecs
import contextlib
import os
import re
import sys
import threading
import traceback
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO, TypeVar
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

from dream_gym.infrastructure.walk import map_strings

#: Shorter values are not treated as secrets (they would mangle ordinary text).
MIN_LENGTH = 8

_SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|PRIVATE|COOKIE|SESSION|WEBHOOK|_PAT$|_DSN$",
    re.IGNORECASE,
)
#: Names that match the markers above but hold no secret (sockets, paths, settings).
_NOT_SECRET = re.compile(
    r"SSH_AUTH_SOCK|XAUTHORITY|DBUS_SESSION_BUS_ADDRESS|SESSION_MANAGER|DESKTOP_SESSION|XDG_SESSION_\w*"
    r"|TOKENIZERS_PARALLELISM|PYTHON_KEYRING_BACKEND",
    re.IGNORECASE,
)
_URL_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@\s]*:[^/@\s]+@")
#: Characters allowed between two characters of a value split by separators.
_SEPARATOR = "[^0-9A-Za-z]{0,3}"
#: Longer values (a whole PEM key) are matched as literals only: a split pattern would be huge.
MAX_SPLIT_LENGTH = 256

_registered: dict[str, str] = {}  # value -> name, from register_secret
_registered_version = 0


def _is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) and not _NOT_SECRET.fullmatch(name)


def _url_password(value: str) -> str | None:
    if not _URL_PASSWORD.match(value):
        return None
    try:
        return urlsplit(value).password
    except ValueError:  # a malformed port or host: not a URL after all
        return None


def _forms(value: str) -> list[str]:
    """The value, stripped, and each long line of a multi-line value (a PEM key's body)."""
    forms = [value, value.strip()]
    if "\n" in value:
        forms += [line.strip() for line in value.splitlines() if not line.startswith("-----")]
    return [f for f in forms if len(f) >= MIN_LENGTH]


def secret_values(environ: Mapping[str, str] = os.environ) -> list[tuple[str, str]]:
    """``(name, value)`` of every secret in ``environ`` (see the module docstring), registered
    secrets included, sorted; a value is listed once."""
    found: dict[str, str] = {}
    for name, value in sorted(environ.items()):
        candidates = list(_forms(value)) if _is_secret_name(name) else []
        password = _url_password(value)
        if password:
            candidates += _forms(password)
        for candidate in candidates:
            found.setdefault(candidate, name)
    for value, name in _registered.items():
        found.setdefault(value, name)
    return sorted((name, value) for value, name in found.items())


def register_secret(value: str | None, name: str = "API_KEY") -> None:
    """Treat ``value`` as a secret for the rest of the process (e.g. an ``api_key`` argument)."""
    global _registered_version
    for form in _forms(value or ""):
        if _registered.get(form) != name:
            _registered[form] = name
            _registered_version += 1


def register_url_secrets(url: str | None, name: str = "API_BASE") -> None:
    """Treat the password and the query values of ``url`` (an ``--api-base`` such as
    ``http://alice:pw@host/v1?api_key=...``) as secrets: the command line a world records, the
    system's logs and its database quoted them word for word."""
    if not url:
        return
    parts = urlsplit(url)
    register_secret(parts.password, name)
    for _, value in parse_qsl(parts.query):
        register_secret(value, name)


# ------------------------------------------------------------------------------------------------
# encodings of a value
# ------------------------------------------------------------------------------------------------

def _base64_core(encode: Callable[[bytes], bytes], raw: bytes, shift: int) -> str:
    """The base64 characters that depend on ``raw`` only when it starts ``shift`` bytes into a
    3-byte group (the first and last characters also carry bits of the neighbouring bytes)."""
    text = encode(b"\0" * shift + raw).decode("ascii").rstrip("=")
    front = (0, 2, 3)[shift]
    back = 1 if (shift + len(raw)) % 3 else 0
    return text[front:len(text) - back]


def encodings(value: str) -> set[str]:
    """The literal forms of ``value`` that are caught (the separator form is a pattern)."""
    raw = value.encode("utf-8")
    forms = {value, value[::-1], codecs.encode(value, "rot13"), raw.hex(), raw.hex().upper(),
             quote(value, safe=""), quote_plus(value, safe="")}
    for shift in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            forms.add(_base64_core(encode, raw, shift))
    return {form for form in forms if len(form) >= MIN_LENGTH}


def _trie_pattern(words: set[str]) -> str:
    """One regex matching any of ``words``, longest first, as a trie: each position of the text
    costs one branch per distinct next character instead of one per word."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _node_pattern(trie)


def _node_pattern(node: dict[str, Any]) -> str:
    run = []
    while len(node) == 1 and "" not in node:  # a chain without branches: one literal run
        ((char, node),) = node.items()
        run.append(re.escape(char))
    branches = [re.escape(char) + _node_pattern(child) for char, child in sorted(node.items()) if char]
    tail = ""
    if branches:
        tail = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:  # a word ends here: the longer words are tried first
            tail = f"(?:{tail})?"
    return "".join(run) + tail


# ------------------------------------------------------------------------------------------------
# the matchers, cached
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Matcher:
    names: dict[str, str]  # each literal form -> the name it is reported under
    literal: re.Pattern[str] | None
    spread: re.Pattern[str] | None  # any value split by separators (no groups: they slow the search)
    spread_each: tuple[tuple[str, re.Pattern[str]], ...]  # (name, pattern) of each value split
    needles: tuple[bytes, ...]  # the squeezed forms: one of them is in the squeezed text of any match
    shortest: int  # the length of the shortest needle

    def _literal_label(self, match: re.Match[str]) -> str:
        return f"[redacted:{self.names[match.group(0)]}]"

    def _spread_label(self, match: re.Match[str]) -> str:
        # rare (a secret was found): which one is worth a second match
        text = match.group(0)
        name = next((name for name, pattern in self.spread_each if pattern.fullmatch(text)), "secret")
        return f"[redacted:{name}]"

    def _may_hold(self, text: str) -> bool:
        if len(text) < self.shortest:  # most strings of a record: too short to hold any
            return False
        squeezed = _squeeze(text)
        for needle in self.needles:
            if needle in squeezed:
                return True
        return False

    def sub(self, text: str) -> str:
        if not self._may_hold(text):
            return text  # the common case, at the speed of bytes.find
        if self.literal is not None:
            text = self.literal.sub(self._literal_label, text)
        if self.spread is not None:
            text = self.spread.sub(self._spread_label, text)
        return text


_ALNUM = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_NOT_ALNUM = bytes(b for b in range(256) if b not in _ALNUM)


def _squeeze(text: str) -> bytes:
    """The ASCII letters and digits of ``text``: a match of any form, split or not, leaves its
    own squeezed form in the squeezed text, so a plain search of those rules most texts out
    (the regexes, with one branch per character at each position, are much slower)."""
    return text.encode("utf-8", "surrogatepass").translate(None, _NOT_ALNUM)


def _split_pattern(value: str) -> str:
    return _SEPARATOR.join(re.escape(char) for char in value)


def _build(pairs: list[tuple[str, str]]) -> _Matcher:
    names: dict[str, str] = {}
    for name, value in sorted(pairs, key=lambda pair: -len(pair[1])):
        for form in encodings(value):
            names.setdefault(form, name)
    if not names:
        return _Matcher({}, None, None, (), (), 0)
    split = [(name, _split_pattern(value)) for name, value in pairs if len(value) <= MAX_SPLIT_LENGTH]
    spread = re.compile("|".join(pattern for _, pattern in split)) if split else None
    needles = tuple(sorted({_squeeze(form) for form in names} | {_squeeze(value) for _, value in pairs}))
    return _Matcher(names, re.compile(_trie_pattern(set(names))), spread,
                    tuple((name, re.compile(pattern)) for name, pattern in split), needles,
                    min(len(needle) for needle in needles))


_lock = threading.Lock()
_cache: tuple[Any, int, _Matcher] | None = None  # (environment snapshot, registered version, matcher)


def _environment_snapshot() -> Any:
    # os.environ keeps its items in a plain dict: comparing it with a copy is one C-level call
    data = getattr(os.environ, "_data", None)
    return dict(data) if isinstance(data, dict) else dict(os.environ)


def _environment_unchanged(snapshot: Any) -> bool:
    data = getattr(os.environ, "_data", None)
    return bool(data == snapshot) if isinstance(data, dict) else dict(os.environ) == snapshot


def _matcher() -> _Matcher:
    """The matcher of the current environment (rebuilt only when it or the registry changed)."""
    global _cache
    cached = _cache
    if cached is not None and cached[1] == _registered_version and _environment_unchanged(cached[0]):
        return cached[2]
    with _lock:
        snapshot, version = _environment_snapshot(), _registered_version
        _cache = (snapshot, version, _build(secret_values()))
        return _cache[2]


#: Keys known by their shape, redacted whatever the environment holds (``[redacted:key]``): a run
#: imported, or a log read, where its key is not set kept it (a system's error text quotes the
#: key its server refused). OpenAI's and Anthropic's ``sk-...``, Hugging Face's ``hf_...``, AWS
#: access key ids, GitHub's tokens and Google's API keys.
#: An ``sk-`` key holds a capital and a digit, which the words of code rarely do together
#: (``'sk-learn-compatible-estimator'`` in a candidate program is left as it is).
KEY_SHAPES = re.compile(r"(?<![A-Za-z0-9_-])(?:sk-(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{16,}"
                        r"|hf_[A-Za-z0-9]{30,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,}|AIza[0-9A-Za-z_-]{35})")


#: What every key of :data:`KEY_SHAPES` begins with: a text holding none (almost every text) is not
#: searched (a substring test is ~20x cheaper than the pattern's search, 161 us per 10 KB of code).
_KEY_PREFIXES = ("sk-", "hf_", "AKIA", "AIza", "ghp_", "gho_", "ghu_", "ghs_", "ghr_")


def _may_hold_key(text: str) -> bool:
    return any(prefix in text for prefix in _KEY_PREFIXES)


def _shapes(text: str) -> str:
    return KEY_SHAPES.sub("[redacted:key]", text) if _may_hold_key(text) else text


def redact(text: str) -> str:
    """``text`` with every secret, in each caught encoding, replaced by ``[redacted:NAME]``, and
    every key of a known shape by ``[redacted:key]``."""
    if not isinstance(text, str):
        return text
    matcher = _matcher()
    return _shapes(matcher.sub(text) if matcher.names else text)


_T = TypeVar("_T")


def redact_value(obj: _T) -> _T:
    """A copy of ``obj`` with every string redacted, recursively through dicts (keys too), lists
    and tuples; other values are kept. Without a secret to replace, ``obj`` itself is returned."""
    matcher = _matcher()
    if matcher.names:
        return map_strings(obj, lambda text: _shapes(matcher.sub(text)))  # type: ignore[no-any-return]
    # no secret in the environment: a copy only where a key of a known shape is (else ``obj`` itself)
    return map_strings(obj, _shapes) if _any_shape(obj) else obj  # type: ignore[no-any-return]


def _any_shape(value: Any) -> bool:
    if isinstance(value, str):
        return _may_hold_key(value) and KEY_SHAPES.search(value) is not None
    if isinstance(value, Mapping):
        return any(_any_shape(k) or _any_shape(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(map(_any_shape, value))
    return False


# ------------------------------------------------------------------------------------------------
# files a system wrote
# ------------------------------------------------------------------------------------------------

#: The largest file :func:`redact_files` reads (a system's log or trace; larger ones are data).
MAX_REDACTED_FILE_BYTES = 64 << 20


def redact_files(folder: str | os.PathLike[str], keep: Collection[str] = ()) -> list[str]:
    """Redact the text files and SQLite databases below ``folder`` in place (each file replaced
    whole, its mode kept; binary files, links and files past :data:`MAX_REDACTED_FILE_BYTES` left),
    except the files named in ``keep``; the files changed. A discovery system writes its own logs,
    traces and database beside the world (OpenEvolve's log quoted the key its server refused 12
    times), where dream_gym's redaction of its records does not reach."""
    changed = []
    for path in sorted(Path(folder).rglob("*")):
        if path.name in keep or path.is_symlink() or not path.is_file():
            continue
        if path.suffix in (".sqlite", ".sqlite3", ".db"):
            if _redact_database(path):
                changed.append(str(path))
        elif path.stat().st_size <= MAX_REDACTED_FILE_BYTES and _redact_text_file(path):
            changed.append(str(path))
    return changed


def _redact_text_file(path: Path) -> bool:
    data = path.read_bytes()
    if b"\0" in data:
        return False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    clean = redact(text)
    if clean == text:
        return False
    temporary = path.with_name(f".{path.name}.redacting")
    temporary.write_text(clean, encoding="utf-8")
    os.chmod(temporary, path.stat().st_mode & 0o7777)
    os.replace(temporary, path)
    return True


def _redact_database(path: Path) -> bool:
    import sqlite3

    found = False
    try:
        with contextlib.closing(sqlite3.connect(path)) as db:
            tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                quoted = '"' + table.replace('"', '""') + '"'
                columns = [row[1] for row in db.execute(f"PRAGMA table_info({quoted})")]
                for rowid, *values in db.execute(f"SELECT rowid, * FROM {quoted}").fetchall():
                    for column, value in zip(columns, values, strict=True):
                        if isinstance(value, str) and (clean := redact(value)) != value:
                            name = '"' + column.replace('"', '""') + '"'
                            db.execute(f"UPDATE {quoted} SET {name} = ? WHERE rowid = ?", (clean, rowid))
                            found = True
            db.commit()
    except sqlite3.DatabaseError:  # not a database, or a table without rowid: left as it is
        return found
    return found


# ------------------------------------------------------------------------------------------------
# printed output
# ------------------------------------------------------------------------------------------------

class RedactingStream:
    """A text stream that redacts what is written to it and passes everything else through."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)  # callers count what they gave

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _redacting_excepthook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    sys.stderr.write(redact("".join(traceback.format_exception(kind, exc, tb))))


@contextmanager
def redacted_output() -> Iterator[None]:
    """Redact everything printed to ``sys.stdout`` and ``sys.stderr`` inside the block, and the
    traceback of an exception that escapes it (Python prints that one after the block, so the
    default ``sys.excepthook`` is replaced by a redacting one for the rest of the process)."""
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = _redacting_excepthook
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(saved[0]), RedactingStream(saved[1])  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


__all__ = [
    "KEY_SHAPES", "MIN_LENGTH", "RedactingStream", "encodings", "redact", "redact_files", "redact_value",
    "redacted_output", "register_secret", "register_url_secrets", "secret_values",
]
