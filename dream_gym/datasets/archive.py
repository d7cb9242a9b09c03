"""Safe packing and unpacking of dataset archives (``.tar.gz``).

:func:`safe_extract` checks every member before it writes anything: absolute names, ``..``
components, backslashes, symbolic and hard links, device files, FIFOs and sparse files are
refused, and so are archives whose members exceed a total size (:data:`MAX_BYTES`) or a file
count (:data:`MAX_FILES`), and members larger than the limit on decompressed data
(``dream_gym.infrastructure.limits``: 256 MB, ``DREAM_GYM_MAX_DECOMPRESSED_MB``). The archive is read as a
stream that cannot go past those sizes, a bounded read at a time, so a compressed bomb costs
neither memory nor disk. Files are written by this module (never by ``TarFile.extractall``),
each inside the destination folder.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import lzma
import os
import tarfile
import zlib
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from dream_gym.infrastructure.limits import (
    BoundedStream,
    LimitError,
    decompressed_limit_problem,
    max_decompressed_bytes,
)

MAX_BYTES = 4 << 30  # 4 GiB of unpacked data
MAX_FILES = 100_000
_HEADER_BYTES = 4 << 10  # allowance per member for its headers and padding in the unpacked stream


class UnsafeArchiveError(ValueError):
    """An archive holds a member that could escape the destination or exhaust the disk."""


def make_archive(folder: str | os.PathLike[str], out: str | os.PathLike[str],
                 files: Iterable[str] | None = None) -> Path:
    """Pack the regular files below ``folder`` (or only ``files``, paths relative to it) into a gzip
    tar with relative, sorted names."""
    folder, out = Path(folder), Path(out)
    paths = sorted(folder.rglob("*")) if files is None else sorted(folder / rel for rel in files)
    with tarfile.open(out, "w:gz") as tar:
        for path in paths:
            if path.is_symlink():
                raise UnsafeArchiveError(f"{path}: symbolic links are not packed")
            if path.is_file():
                info = tar.gettarinfo(str(path), arcname=path.relative_to(folder).as_posix())
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                with open(path, "rb") as handle:
                    tar.addfile(info, handle)
    return out


def _check_name(archive: Path, name: str) -> PurePosixPath:
    if not name or "\\" in name or "\x00" in name:
        raise UnsafeArchiveError(f"{archive}: member {name!r} has an unsafe name")
    pure = PurePosixPath(name)
    if pure.is_absolute() or name.startswith("/"):
        raise UnsafeArchiveError(f"{archive}: member {name!r} has an absolute path")
    if ".." in pure.parts:
        raise UnsafeArchiveError(f"{archive}: member {name!r} climbs out with '..'")
    return pure


def member_name(archive: Path, member: tarfile.TarInfo) -> str:
    """A member's name as a relative POSIX path (``./a//b`` is ``a/b``), checked to be safe."""
    return _check_name(archive, member.name).as_posix()


def _decompressing(raw: Any) -> Any:
    """A reader of the tar stream inside ``raw`` (gzip, bzip2, xz or none, told by its magic)."""
    magic = raw.read(6)
    raw.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw)
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(raw)
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw)
    return raw


@contextlib.contextmanager
def _open_tar(archive: Path, max_bytes: int, max_files: int) -> Iterator[tarfile.TarFile]:
    """The archive as a TarFile over a bounded stream: it cannot inflate past what ``max_bytes``
    of members and ``max_files`` headers need, nor read a header too large to hold."""
    with open(archive, "rb") as raw, contextlib.closing(_decompressing(raw)) as inner:
        stream = BoundedStream(inner, max_total=max_bytes + (max_files + 1) * _HEADER_BYTES)
        with _read_errors(archive):
            tar = tarfile.open(fileobj=stream, mode="r:")  # type: ignore[call-overload]
        with tar:
            yield tar


@contextlib.contextmanager
def _read_errors(archive: Path) -> Iterator[None]:
    """Reading errors (a corrupt stream, a limit reached) as :class:`UnsafeArchiveError` naming the archive."""
    try:
        yield
    except LimitError as exc:
        raise UnsafeArchiveError(f"{archive}: {exc}") from None
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise UnsafeArchiveError(f"{archive}: not a readable tar archive ({exc})") from None


def _check_member(archive: Path, member: tarfile.TarInfo, max_file_bytes: int) -> None:
    _check_name(archive, member.name)
    if member.issym() or member.islnk():
        raise UnsafeArchiveError(f"{archive}: member {member.name!r} is a link (refused)")
    if member.isdev() or member.isfifo() or not (member.isfile() or member.isdir()):
        raise UnsafeArchiveError(f"{archive}: member {member.name!r} is a device or special file (refused)")
    if member.issparse():  # its data is smaller than the file it unpacks to: a disk bomb
        raise UnsafeArchiveError(f"{archive}: member {member.name!r} is a sparse file (refused)")
    if member.size > max_file_bytes:
        raise UnsafeArchiveError(f"{archive}: member {member.name!r} " + decompressed_limit_problem(max_file_bytes))


def check_members(
    archive: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES, max_files: int = MAX_FILES
) -> list[tarfile.TarInfo]:
    """Return the archive's members after checking each; raise :class:`UnsafeArchiveError`."""
    archive = Path(archive)
    max_file_bytes = max_decompressed_bytes()
    total = 0
    members: list[tarfile.TarInfo] = []
    with _open_tar(archive, max_bytes, max_files) as tar, _read_errors(archive):
        for member in tar:
            _check_member(archive, member, max_file_bytes)
            members.append(member)
            if len(members) > max_files:
                raise UnsafeArchiveError(f"{archive}: more than {max_files} members (limit)")
            total += max(member.size, 0)
            if total > max_bytes:
                raise UnsafeArchiveError(
                    f"{archive}: members unpack to more than {max_bytes} bytes (limit)"
                )
    return members


def safe_extract(
    archive: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    max_bytes: int = MAX_BYTES,
    max_files: int = MAX_FILES,
    members: list[tarfile.TarInfo] | None = None,
    only: Collection[str] | None = None,
) -> list[Path]:
    """Unpack ``archive`` into ``dest`` after checking every member; return the files written.
    ``members``: what :func:`check_members` returned for it (not read again); ``only``: the
    members to write, by name (the others are checked, not written)."""
    archive, dest = Path(archive), Path(dest)
    members = check_members(archive, max_bytes=max_bytes, max_files=max_files) if members is None else members
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    written: list[Path] = []
    with _open_tar(archive, max_bytes, max_files) as tar:
        for member in members:
            if only is not None and member_name(archive, member) not in only:
                continue
            target = (root / member.name).resolve()
            if target != root and root not in target.parents:
                raise UnsafeArchiveError(f"{archive}: member {member.name!r} resolves outside {dest}")
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with _read_errors(archive):
                source = tar.extractfile(member)
            if source is None:
                raise UnsafeArchiveError(f"{archive}: member {member.name!r} cannot be read")
            with source, open(target, "xb") as handle:
                _copy_member(archive, member, source, handle)
            written.append(target)
    return written


def _copy_member(archive: Path, member: tarfile.TarInfo, source: Any, handle: Any) -> None:
    """Copy a member's data a block at a time (read errors name the archive; write errors stay)."""
    remaining = member.size
    while remaining > 0:
        with _read_errors(archive):
            block = source.read(min(remaining, 1 << 20))
        if not block:
            raise UnsafeArchiveError(f"{archive}: member {member.name!r} is truncated")
        handle.write(block)
        remaining -= len(block)
