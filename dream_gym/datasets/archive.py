"""Safe packing and unpacking of dataset archives (``.tar.gz``).

:func:`safe_extract` checks every member before it writes anything: absolute names, ``..``
components, backslashes, symbolic and hard links, device files and FIFOs are refused, and so are
archives whose members exceed a total size or a file count. Files are written by this module
(never by ``TarFile.extractall``), each inside the destination folder.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path, PurePosixPath

MAX_BYTES = 4 << 30  # 4 GiB of unpacked data
MAX_FILES = 100_000


class UnsafeArchiveError(ValueError):
    """An archive holds a member that could escape the destination or exhaust the disk."""


def make_archive(folder: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Pack the regular files below ``folder`` into a gzip tar with relative, sorted names."""
    folder, out = Path(folder), Path(out)
    with tarfile.open(out, "w:gz") as tar:
        for path in sorted(folder.rglob("*")):
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


def check_members(
    archive: str | os.PathLike[str], *, max_bytes: int = MAX_BYTES, max_files: int = MAX_FILES
) -> list[tarfile.TarInfo]:
    """Return the archive's members after checking each; raise :class:`UnsafeArchiveError`."""
    archive = Path(archive)
    try:
        tar = tarfile.open(archive, "r:*")
    except tarfile.TarError as exc:
        raise UnsafeArchiveError(f"{archive}: not a readable tar archive ({exc})") from None
    total = 0
    members: list[tarfile.TarInfo] = []
    with tar:
        for member in tar:
            _check_name(archive, member.name)
            if member.issym() or member.islnk():
                raise UnsafeArchiveError(f"{archive}: member {member.name!r} is a link (refused)")
            if member.isdev() or member.isfifo() or not (member.isfile() or member.isdir()):
                raise UnsafeArchiveError(
                    f"{archive}: member {member.name!r} is a device or special file (refused)"
                )
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
) -> list[Path]:
    """Unpack ``archive`` into ``dest`` after checking every member; return the files written."""
    archive, dest = Path(archive), Path(dest)
    members = check_members(archive, max_bytes=max_bytes, max_files=max_files)
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    written: list[Path] = []
    with tarfile.open(archive, "r:*") as tar:
        for member in members:
            target = (root / member.name).resolve()
            if target != root and root not in target.parents:
                raise UnsafeArchiveError(f"{archive}: member {member.name!r} resolves outside {dest}")
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            if source is None:
                raise UnsafeArchiveError(f"{archive}: member {member.name!r} cannot be read")
            with source, open(target, "xb") as handle:
                remaining = member.size
                while remaining > 0:
                    block = source.read(min(remaining, 1 << 20))
                    if not block:
                        raise UnsafeArchiveError(f"{archive}: member {member.name!r} is truncated")
                    handle.write(block)
                    remaining -= len(block)
            written.append(target)
    return written
