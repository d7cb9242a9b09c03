"""How to add an optional extra to this installation of dream_gym, for the messages that need one.

``pip install 'dream-gym[rl]'`` is right for an installation from a package index only: a user who
installed a wheel file, or works in a source checkout, needs pip to be given that wheel or that
folder again (a package index may hold no ``dream-gym`` at all). What pip recorded of the
installation (``direct_url.json``) and where the package lives say which.

This module imports nothing of dream_gym.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import shlex
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "dream-gym"


def install_source(package: Path, recorded: str | None) -> tuple[str, bool]:
    """(what pip installs dream_gym from, whether it is a folder to install editable), for the
    package folder ``package`` and what pip recorded of its installation (``direct_url.json``'s
    text, None when there is none): the checkout holding it; else the wheel file or folder it was
    installed from, while it exists; else the distribution's name, for a package index."""
    root = package.parent
    if (root / "pyproject.toml").is_file() and (root / package.name).is_dir():
        return str(root), True  # a source checkout (its editable install, or on sys.path)
    try:
        url = json.loads(recorded or "{}").get("url", "")
    except (ValueError, AttributeError):
        url = ""
    parsed = urlparse(url if isinstance(url, str) else "")
    path = Path(unquote(parsed.path))
    if parsed.scheme == "file" and path.exists():
        return str(path), False
    return DISTRIBUTION, False


@functools.cache
def _source() -> tuple[str, bool]:
    try:
        recorded = importlib.metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        recorded = None
    return install_source(Path(__file__).resolve().parents[1], recorded)


#: PyTorch's CPU build, installed before the rl extra where torch is missing: left to pip, the
#: extra brings the default build, on Linux a CUDA one of several GB
TORCH_CPU = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def install_command(extra: str) -> str:
    """The pip command that adds ``extra`` to this installation, e.g.
    ``pip install 'dream-gym[rl]'``, ``pip install '/tmp/dist/dream_gym-0.1.0-py3-none-any.whl[rl]'``
    or, in a checkout, ``pip install -e '/home/me/dream_gym[rl]'``; for ``rl`` without torch,
    PyTorch's CPU build first (:data:`TORCH_CPU`, then ``&&``)."""
    import importlib.util

    source, editable = _source()
    command = f"pip install {'-e ' if editable else ''}{shlex.quote(f'{source}[{extra}]')}"
    if extra == "rl" and importlib.util.find_spec("torch") is None:
        return f"{TORCH_CPU} && {command}"
    return command


def needs_extra(what: str, extra: str) -> str:
    """The message of ``what`` (a command, a backend, a kind of policy) that needs ``extra``."""
    return f"{what} needs the {extra} extra: {install_command(extra)}"


__all__ = ["TORCH_CPU", "install_command", "install_source", "needs_extra"]
