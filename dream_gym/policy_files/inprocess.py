"""Building a policy in this process: a policy file's namespace, ``module:attr``, a built-in name.

The parent uses :func:`resolve_in_process` for trusted specs (:mod:`dream_gym.policy_files.specs`),
the isolated child (:mod:`dream_gym.policy_files.child`) for the file it was started for, so this
module imports neither of them: both sides build policies the same way.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import traceback
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dream_gym.policy import FunctionPolicy, Policy, construct
from dream_gym.policy_files.errors import PolicyLoadError, PolicyNotFoundError


def _defined_here(obj: Any, module_name: str) -> bool:
    return getattr(obj, "__module__", None) == module_name


def policy_from_namespace(namespace: Mapping[str, Any], source: str) -> Policy:
    """The policy a module defines (see the module docstring for the convention)."""
    module_name = str(namespace.get("__name__", ""))
    factory = namespace.get("make_policy")
    if callable(factory) and _defined_here(factory, module_name):
        return _checked(factory(), source, "make_policy()")
    cls = namespace.get("Policy")
    if isinstance(cls, type) and _defined_here(cls, module_name):
        return _named_by_file(_checked(cls(), source, "Policy()"), source)
    classes = [v for v in namespace.values()
               if isinstance(v, type) and _defined_here(v, module_name)
               and callable(getattr(v, "act", None)) and callable(getattr(v, "reset", None))]
    if len(classes) == 1:
        return _checked(classes[0](), source, f"{classes[0].__name__}()")
    for fname in ("act", "policy"):
        fn = namespace.get(fname)
        if callable(fn) and not isinstance(fn, type) and _defined_here(fn, module_name):
            return FunctionPolicy(fn, name=Path(source).stem)
    found = f" (it defines {len(classes)} policy classes: {', '.join(c.__name__ for c in classes)})" if classes else ""
    raise PolicyLoadError(
        f"{source} defines no policy{found}: define make_policy(), a class named Policy with "
        "reset(context) and act(view), or a top-level function act(view)"
    )


def _named_by_file(policy: Policy, source: str) -> Policy:
    """A ``Policy`` of the convention with no ``name`` of its own is named by its file, as a
    function ``act`` is: every file's class is called Policy, so the class name tells none apart."""
    if not getattr(policy, "name", None):
        with contextlib.suppress(AttributeError, TypeError):  # a property or __slots__: its own business
            policy.name = Path(source).stem  # type: ignore[attr-defined]
    return policy


def _checked(obj: Any, source: str, what: str) -> Policy:
    missing = [f"{name}()" for name in ("reset", "act") if not callable(getattr(obj, name, None))]
    if missing:
        raise PolicyLoadError(f"{source}: {what} returned {type(obj).__name__}, which lacks {' and '.join(missing)}")
    return obj  # type: ignore[no-any-return]


def _module_name_for(path: Path) -> str:
    return "dream_gym_policy_file_" + re.sub(r"\W", "_", path.stem)


def policy_from_code(code: types.CodeType, path: str) -> Policy:
    """Execute a policy file's compiled code as a new module and return its policy."""
    name = _module_name_for(Path(path))
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module  # dataclasses and pickling look the module up
    exec(code, module.__dict__)
    return policy_from_namespace(vars(module), path)


def load_policy_file(path: str | os.PathLike[str]) -> Policy:
    """Import a policy file IN THIS PROCESS (trusted files only) and return its policy."""
    path = Path(path).resolve()
    if not path.is_file():
        raise PolicyNotFoundError(f"policy file {path} does not exist")
    try:
        code = compile(path.read_bytes(), str(path), "exec")
        namespace_policy = policy_from_code(code, str(path))
    except PolicyLoadError:
        raise
    except Exception as exc:
        sys.modules.pop(_module_name_for(path), None)
        raise PolicyLoadError(f"importing {path} failed: {type(exc).__name__}: {exc}{where(exc, str(path))}") from exc
    return namespace_policy


def module_attr(spec: str) -> Any:
    """The object ``module:attr`` names (the module is imported; nothing is built)."""
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        here = Path(*module_name.split(".")).with_suffix(".py")
        hint = (f"; {here} is in this folder: give the file ({here}) to run it isolated, or put this folder on "
                "PYTHONPATH to import it as trusted code") if exc.name == module_name and here.is_file() else ""
        raise PolicyNotFoundError(f"policy {spec!r}: no module {module_name!r} ({exc}){hint}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise PolicyNotFoundError(f"policy {spec!r}: {module_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def load_module_attr(spec: str, params: Mapping[str, Any]) -> Policy:
    obj = module_attr(spec)
    attr = spec.partition(":")[2]
    if isinstance(obj, type):
        return _checked(construct(obj, params, f"policy {spec!r}"), spec, f"{attr}()")
    if params:
        raise ValueError(f"policy {spec!r} is not a class; parameters {sorted(params)} cannot be passed")
    if callable(getattr(obj, "act", None)) and callable(getattr(obj, "reset", None)):
        return obj  # type: ignore[no-any-return]
    if callable(obj):
        return FunctionPolicy(obj, name=attr)
    raise PolicyLoadError(f"policy {spec!r} is a {type(obj).__name__}, not a policy class, object or function")


def is_file_spec(spec: str) -> bool:
    """A path (ends with .py or has a folder part) rather than a name or module:attr."""
    return spec.endswith(".py") or (os.sep in spec and ":" not in spec)


def resolve_in_process(spec: str, params: Mapping[str, Any]) -> Policy:
    if is_file_spec(spec):
        if params:
            raise ValueError(f"policy file {spec}: parameters cannot be passed to a file's policy")
        return load_policy_file(spec)
    if ":" in spec:
        return load_module_attr(spec, params)
    from dream_gym.policies import make_policy  # here: a policy file's template needs no built-in

    try:
        return make_policy(spec, **params)
    except LookupError as exc:
        raise PolicyNotFoundError(f"{exc}; or give module:Class or a path to a .py file") from None


def where(exc: BaseException, source: str) -> str:
    """' (at file.py line N, in fn)' for the innermost frame in the policy file."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == source]
    if not frames:
        return ""
    f = frames[-1]
    return f" (at {Path(f.filename).name} line {f.lineno}, in {f.name})"


__all__ = ["is_file_spec", "load_module_attr", "load_policy_file", "module_attr", "policy_from_code",
           "policy_from_namespace", "resolve_in_process", "where"]
