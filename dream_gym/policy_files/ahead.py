"""What a policy file's template imports ahead of its episodes, and the import rule of an episode.

A policy episode reads no file (a file read or a path looked up would leave a trace in the
kernel's caches that a later episode could time), so it cannot import a module: the template
imports, once, every module the file names (:func:`named_in`, :func:`import_ahead`), and an
episode's import system finds only those (:func:`only_imported_modules`). The file is parsed
here, never run.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import re
import sys
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Standard-library modules whose import does something besides defining names (opens a
#: browser, prints, starts a GUI): never imported ahead.
NOT_AHEAD = frozenset({"antigravity", "this", "turtle", "turtledemo", "tkinter", "idlelib", "webbrowser"})

#: Modules that a module imports only when first used, not when imported: a network module looks
#: up the ``idna`` codec for a host name, and an episode could not import it (its call failed as
#: ``LookupError: unknown encoding: idna`` where the sandbox's refusal of the network belongs).
USED_LATER = {name: ("encodings.idna",) for name in ("socket", "ssl", "http", "urllib", "asyncio", "smtplib",
                                                      "ftplib", "xmlrpc")}


@dataclass
class Named:
    """What a policy file names: ``modules``, those it imports (an import statement anywhere in
    the file, or a literal given to ``importlib.import_module`` or ``__import__``; a failure to
    import one is the file's load error), and ``attributes``, the attribute chains it reads from
    a module it imported (``np.random.default_rng``: ``("numpy", ("random", "default_rng"))``).
    A package may load a submodule only when its attribute is first read (numpy 2 loads
    ``numpy.random`` so); the template reads each chain, so that the episode finds it loaded."""

    modules: list[str] = field(default_factory=list)
    attributes: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)


def named_in(source: bytes) -> Named:
    """The modules and attribute chains a policy file names (nothing when it does not parse: its
    load reports the syntax error). Not those that act when imported: a few by name
    (:data:`NOT_AHEAD`) and every ``__main__``, which runs a program."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return Named()
    modules: list[str] = []
    bound: dict[str, str] = {}  # a name an import binds -> the module (or module.name) it holds
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found = [alias.name for alias in node.names]
            bound.update(map(_bound_by_import, node.names))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            bound.update((alias.asname or alias.name, f"{node.module}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Call) and _is_import_call(node.func) and node.args and (
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found = [node.args[0].value]
        else:
            continue
        modules += [name for name in found if _may_import(name)]
        modules += [later for name in found for later in USED_LATER.get(name.partition(".")[0], ())]
    attributes = [(bound[root], chain) for root, chain in _attribute_chains(tree) if root in bound
                  and _may_import(bound[root])]
    return Named(list(dict.fromkeys(modules)), list(dict.fromkeys(attributes)))


def _bound_by_import(alias: ast.alias) -> tuple[str, str]:
    """The name ``import a.b as c`` binds and the module it holds (``c``, ``a.b``); without
    ``as``, ``a`` and ``a``."""
    if alias.asname:
        return alias.asname, alias.name
    top = alias.name.partition(".")[0]
    return top, top


def _may_import(name: str) -> bool:
    return "__main__" not in name.split(".") and name.partition(".")[0] not in NOT_AHEAD


def _is_import_call(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id in ("__import__", "import_module")) or (
        isinstance(func, ast.Attribute) and func.attr == "import_module")


def _attribute_chains(tree: ast.AST) -> list[tuple[str, tuple[str, ...]]]:
    """Every ``name.a.b`` of the file, as ``("name", ("a", "b"))`` (the longest chain and each
    shorter one: ``np.random`` too)."""
    chains = []
    for node in ast.walk(tree):
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if parts and isinstance(node, ast.Name):
            chains.append((node.id, tuple(reversed(parts))))
    return chains


def import_ahead(named: Named) -> dict[str, str]:
    """Import, here in the confined template, what the file names, so that every episode finds
    it imported (``statistics``, ``fractions`` and ``decimal`` alone take milliseconds to
    import, numpy about 85). ``a.b`` that is no module is a name a file imports from ``a``: it
    is looked up, which runs a deferred package's ``__init__`` (``from dream_gym import
    PrefixView``). Then each attribute chain is read, from modules only, and whatever fails is
    left to the episode, where the same code fails the same way. Returns the modules that failed
    to import, with their errors, for the episode's import error. A package that starts threads
    as it imports keeps none in the episodes (a fork copies one thread); the sandbox's
    environment caps numpy's BLAS pool at one thread, so numpy starts none."""
    failed: dict[str, str] = {}
    for name in named.modules:
        try:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name != name or "." not in name:
                    raise
                parent, _, attribute = name.rpartition(".")  # a name imported from a module
                getattr(importlib.import_module(parent), attribute, None)
        except ModuleNotFoundError as exc:
            failed[exc.name or name] = str(exc)  # the episode raises a ModuleNotFoundError too
        except PermissionError as exc:  # Landlock: code a policy may not read (isolated.READABLE_PARTS)
            own = "dream_gym" in Path(str(exc.filename)).parts
            failed[name] = f"PermissionError: {exc.strerror}: {_in_package(exc.filename)}" + (
                " (a policy may read the code of the layers it stands on, not of dream_gym's online loop, its "
                "agents and tasks)" if own else "")
        except BaseException as exc:  # noqa: BLE001 - the episode reports the error as its own
            failed[name] = f"{type(exc).__name__}: {exc}"
    for module, chain in named.attributes:
        _read_chain(module, chain)
    _load_deferred_submodules()
    _load_deferred_imports(named.modules)
    return failed


def _in_package(filename: Any) -> str:
    """A file below dream_gym's folder named from it (``dream_gym/online/__init__.py``); another
    by its name alone (the install's path is no business of a policy's error)."""
    parts = Path(str(filename)).parts
    return "/".join(parts[len(parts) - parts[::-1].index("dream_gym") - 1:]) if "dream_gym" in parts else parts[-1]


def _read_chain(module: str, chain: tuple[str, ...]) -> None:
    value: Any = sys.modules.get(module)
    for attribute in chain:
        if not isinstance(value, types.ModuleType):  # a module's lazy attribute, nothing else
            return
        try:
            value = getattr(value, attribute)
        except Exception:  # noqa: BLE001 - not an attribute here: the episode's own error
            return


#: A package's tools, not its library: never loaded ahead unless the file names them.
_TOOLS = frozenset({"testing", "tests", "test", "conftest", "f2py", "distutils", "typing", "_pytesttester"})


def _load_deferred_submodules() -> None:
    """Load each submodule that an installed package (not the standard library's, not
    dream_gym's, whose modules load what they use when imported) defers until its attribute is
    first read, where the package's own loaded code reads that attribute: ``np.median`` reads
    ``np.ma``, which numpy 2 loads then. Not every deferred submodule: scipy defers all of its
    own (about 1 s and 80 MB to load them all)."""
    for name, package in list(sys.modules.items()):
        if "." in name or name in sys.stdlib_module_names or name == "dream_gym" or (
                "__getattr__" not in vars(package) or not hasattr(package, "__path__")):
            continue
        try:
            deferred = [attribute for attribute in dir(package) if attribute not in vars(package)
                        and not attribute.startswith("_") and attribute not in _TOOLS]
        except Exception:  # noqa: BLE001 - a package's __dir__ that fails: nothing to load
            continue
        if deferred:
            code = _loaded_code(name)
            for attribute in deferred:
                if re.search(rb"\." + re.escape(attribute.encode()) + rb"\b", code):
                    _read_chain(name, (attribute,))


#: Standard-library modules never loaded for a deferred import: tools, and what an episode may
#: not use anyway (processes, threads, sockets); a file that names one gets it all the same.
_NOT_DEFERRED = _TOOLS | {"doctest", "unittest", "pdb", "pydoc", "subprocess", "multiprocessing", "concurrent",
                          "threading", "socket", "asyncio"}
#: An import statement inside a function or class (indented): ``import a, b.c`` or ``from .a import b``.
_INDENTED_IMPORT = re.compile(rb"^[ \t]+(?:from[ \t]+(\.*[\w.]*)[ \t]+import\b|import[ \t]+([\w. \t,]+))", re.M)


def _load_deferred_imports(modules: Sequence[str]) -> None:
    """Load what the standard-library modules a file names import inside their functions, one
    level deep: ``Counter.most_common`` imports ``heapq`` when first called, ``strptime``
    ``_strptime``. Standard-library modules only: an installed package's deferred imports can
    reach far (numpy's reach ``requests`` through its data sources)."""
    for name in modules:
        module = sys.modules.get(name)
        if module is None or name.partition(".")[0] not in sys.stdlib_module_names:
            continue
        for target in _deferred_imports(module):
            top = target.partition(".")[0]
            if top in sys.stdlib_module_names and top not in _NOT_DEFERRED and _may_import(target):
                try:
                    importlib.import_module(target)
                except Exception:  # noqa: BLE001, S112 - a platform's module (nt) or a name, not a module
                    continue


def _deferred_imports(module: types.ModuleType) -> list[str]:
    """The modules a module's source imports in indented import statements."""
    code = _source(module)
    package = module.__name__ if hasattr(module, "__path__") else module.__name__.rpartition(".")[0]
    found = []
    for relative, names in _INDENTED_IMPORT.findall(code):
        if relative:
            text = relative.decode()
            level = len(text) - len(text.lstrip("."))
            base = package.rsplit(".", level - 1)[0] if level > 1 else package
            found.append(text if not level else f"{base}.{text[level:]}".rstrip("."))
        else:
            found += [alias.split()[0] for alias in names.decode().split(",") if alias.strip()]
    return found


def _loaded_code(package: str) -> bytes:
    """The source of every module of ``package`` loaded here."""
    return b"\n".join(_source(module) for name, module in list(sys.modules.items())
                      if name.partition(".")[0] == package)


def _source(module: types.ModuleType) -> bytes:
    """A module's Python source (nothing for an extension module or one without a file)."""
    path = getattr(module, "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return b""
    try:
        with open(path, "rb") as source:
            return source.read()
    except OSError:
        return b""


class _NotAhead:
    """An episode's last finder, after the built-in and frozen ones: an episode reads no file,
    so a module the template did not import cannot be imported; this says why."""

    def __init__(self, failed: Mapping[str, str]):
        self.failed = dict(failed)

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        # the failure of the module, of a package above it, or of a module below it that the file named
        why = next((error for failed, error in self.failed.items()
                    if failed == name or name.startswith(f"{failed}.") or failed.startswith(f"{name}.")), None)
        if why:
            raise ModuleNotFoundError(f"importing {name} failed ahead of the episodes: {why}", name=name)
        raise ModuleNotFoundError(
            f"no module {name} in this episode: a policy episode reads no file, so it imports only what was imported "
            f"before it started, the modules the file names (add 'import {name}' to the file)", name=name)


def only_imported_modules(failed: Mapping[str, str]) -> None:
    """In an episode: no finder that reads files (the kernel refuses every file anyway); an
    import of a module not imported ahead fails with a :class:`ModuleNotFoundError` that says
    which import to add, or why it failed ahead (``failed``, from :func:`import_ahead`)."""
    sys.meta_path[:] = [f for f in sys.meta_path if f in (importlib.machinery.BuiltinImporter,
                                                         importlib.machinery.FrozenImporter)]
    sys.meta_path.append(_NotAhead(failed))


__all__ = ["NOT_AHEAD", "USED_LATER", "Named", "import_ahead", "named_in", "only_imported_modules"]
