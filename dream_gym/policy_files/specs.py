"""Policy specs: what a ``--policy`` string names, and how that policy is built.

:func:`load_policy` accepts four kinds of spec:

* a built-in name (``"greedy"``): :func:`dream_gym.policies.make_policy`, in-process;
* ``module:attr`` (``"my_pkg.agents:BeamPolicy"``): trusted code the user installed, imported
  in-process; a class is instantiated, a policy object used as is, a function becomes a
  :class:`~dream_gym.policy.FunctionPolicy`;
* a path to a ``.py`` file: **untrusted** (maybe LLM-written), run isolated by default in an
  :class:`~dream_gym.policy_files.isolated.IsolatedPolicy`. The file defines, in this order of
  preference, a ``make_policy()`` factory, a ``Policy`` class, exactly one class with ``reset``
  and ``act``, or a top-level function ``act(view)`` / ``policy(view)`` (optionally
  ``(view, context)``). Only objects the file itself defines count (an imported ``make_policy``
  is ignored). The file must be self-contained: it may import installed packages, not helper
  files next to it;
* a trained stable-baselines3 model ``.zip``, or the name of a shipped one (``ppo-macro``,
  ``ppo-node``: :data:`dream_gym.policies.trained.SHIPPED_MODELS`): :func:`dream_gym.rl.model_policy`
  (macro or node-level, read off the model), in-process; zips joined by ``+``
  (``a.zip+b.zip+c.zip``) are a seed ensemble (:class:`dream_gym.rl.ensemble.EnsemblePolicy`);
* ``recommended``: the spec :mod:`dream_gym.policies.recommended` names (one of the kinds above).

:func:`~dream_gym.policy_files.inprocess.resolve_in_process` builds the policy object of a spec
in the current process; the parent uses it for trusted specs, the isolated child
(:mod:`dream_gym.policy_files.child`) for the file it was started for.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dream_gym.policies import POLICIES
from dream_gym.policies.recommended import resolve as resolve_recommended
from dream_gym.policies.trained import SHIPPED_MODELS
from dream_gym.policy import Policy
from dream_gym.policy_files.errors import PolicyNotFoundError
from dream_gym.policy_files.inprocess import (
    is_file_spec,
    load_policy_file,
    module_attr,
    policy_from_namespace,
    resolve_in_process,
    where,
)
from dream_gym.policy_files.isolated import IsolatedPolicy


def check_policy_spec(spec: str | os.PathLike[str]) -> None:
    """Raise :class:`PolicyNotFoundError` when ``spec`` names nothing: an unknown built-in name,
    a missing file, module or attribute. Builds nothing (no model is loaded, no child started,
    no constructor runs), so a parent can check specs that only its workers will build."""
    spec = resolve_recommended(os.fspath(spec))
    if is_model_spec(spec):
        model_files(spec)  # raises when a zip is missing
    elif is_file_spec(spec):
        if not Path(spec).is_file():
            raise PolicyNotFoundError(f"policy file {spec} does not exist")
    elif ":" in spec:
        module_attr(spec)
    elif spec not in POLICIES:
        resolve_in_process(spec, {})  # raises the error that lists the built-in names


def probe_policy_files(specs: Sequence[str | os.PathLike[str]], **limits: Any) -> None:
    """Load each policy file of ``specs`` once, in its sandbox, and close it: a file that does
    not load (a syntax error, an import that fails, no policy defined) raises its
    :class:`PolicyLoadError` here, once, before a grid runs its episodes (which would each
    report it). Other specs are left to :func:`check_policy_spec`."""
    from dream_gym.policy_files.isolated import IsolatedPolicy

    for spec in specs:
        named = resolve_recommended(os.fspath(spec))
        if is_file_spec(named) and not is_model_spec(named):
            IsolatedPolicy(named, **limits).close()


def load_policy(spec: str | os.PathLike[str], *, isolate: bool | None = None,
                params: Mapping[str, Any] | None = None, **limits: Any) -> Policy:
    """A policy from a built-in name, ``module:attr``, a ``.py`` file path, or a trained
    stable-baselines3 model: a ``.zip`` or a shipped model's name (``ppo-macro``, ``ppo-node``),
    built by :func:`dream_gym.rl.model_policy` in-process, its zip read as data: no pickled
    entry of it is unpickled (a zip that needs one is refused; inside
    ``with dream_gym.rl.trusted_models():`` it is unpickled, for a model whose author you trust;
    ``params`` such as ``deterministic`` go to it).

    Args:
        spec: see the module docstring.
        isolate: run in an :class:`~dream_gym.policy_files.isolated.IsolatedPolicy`. Default:
            True for files (untrusted), False for built-in names and modules (trusted code).
        params: constructor parameters for a built-in or ``module:Class`` policy.
        limits: ``IsolatedPolicy`` options (``decision_timeout_s``, ``episode_timeout_s``,
            ``memory_mb``, ``max_output_bytes``, ``harden``, ...); only with isolation.

    Raises:
        PolicyNotFoundError (a LookupError): unknown name, missing module or file.
        PolicyLoadError (a ValueError): the file defines no policy or fails to import.
    """
    named = os.fspath(spec)
    spec = resolve_recommended(named)
    if spec != named:  # recommended: the policy it names, labelled with the name the user gave
        policy = load_policy(spec, isolate=isolate, params=params, **limits)
        with contextlib.suppress(AttributeError):
            policy.name = named  # type: ignore[attr-defined]
        return policy
    params = dict(params or {})
    if is_model_spec(spec):  # read as data (dream_gym.rl.model_zips), in-process
        if isolate or limits:
            raise ValueError(f"{spec}: SB3 models load in-process only (no isolate=True, no limits)")
        return _model_policy(spec, model_files(spec), params)
    is_file = is_file_spec(spec)
    if is_file and not Path(spec).is_file():
        raise PolicyNotFoundError(f"policy file {spec} does not exist")
    if isolate is None:
        isolate = is_file
    if not isolate:
        if limits:
            raise ValueError(f"limits {sorted(limits)} only apply to isolated policies (isolate=True)")
        return resolve_in_process(spec, params)
    if not is_file and ":" not in spec:
        resolve_in_process(spec, params)  # fail fast on unknown names, in the parent
    return IsolatedPolicy(spec, params=params, **limits)


#: What a trained model's policy imports (torch, SB3, sb3-contrib: seconds): a job pool whose
#: tasks run models names them for its fork server to import once, instead of every job.
MODEL_MODULES = ("sb3_contrib", "dream_gym.rl.archs", "dream_gym.rl.ensemble", "dream_gym.rl.node_policy")


def is_model_spec(spec: str) -> bool:
    """A trained model: a ``.zip``, zips joined by ``+`` (a seed ensemble) or a shipped model's name."""
    spec = resolve_recommended(spec)
    return spec.endswith(".zip") or spec in SHIPPED_MODELS


def model_files(spec: str) -> list[Path]:
    """The zips of a model spec (a file whose name holds ``+`` is itself, not an ensemble);
    PolicyNotFoundError naming a missing one."""
    from dream_gym.policies.trained import shipped_files

    spec = resolve_recommended(spec)
    if spec in SHIPPED_MODELS:
        try:
            return shipped_files(spec)
        except FileNotFoundError as exc:
            raise PolicyNotFoundError(str(exc)) from None
    paths = [Path(spec)] if Path(spec).is_file() else [Path(part) for part in spec.split("+")]
    for path in paths:
        if not path.name.endswith(".zip"):
            raise PolicyNotFoundError(f"{spec}: an ensemble joins model zips with '+', and {path} is no .zip")
        if not path.is_file():
            raise PolicyNotFoundError(f"model file {path} does not exist")
    return paths


def _model_policy(spec: str, paths: list[Path], params: Mapping[str, Any]) -> Policy:
    """One model's policy (:func:`dream_gym.rl.model_policy`), or the ensemble of several."""
    if len(paths) == 1:
        from dream_gym.rl.archs import model_policy

        policy: Any = model_policy(paths[0], **params)
    else:
        from dream_gym.rl.ensemble import EnsemblePolicy

        if dict(params) not in ({}, {"deterministic": True}):
            raise ValueError(f"{spec}: an ensemble acts deterministically (most likely action); params {dict(params)}")
        policy = EnsemblePolicy(paths)
    policy.name = spec if spec in SHIPPED_MODELS else policy.name
    return policy  # type: ignore[no-any-return]


class PolicySource:
    """A fresh policy object for every episode of one spec: no state crosses episodes.

    * a policy file: one :class:`~dream_gym.policy_files.isolated.IsolatedPolicy`, whose every
      ``reset`` runs in a new process forked from its template (its own guarantee);
    * a built-in or ``module:Class``: :meth:`new` builds a new object (a module's globals and
      class attributes are trusted code's business: they are not reset);
    * a model: its zips are loaded once per process, and :meth:`new` wraps them in a new policy.

    Args: the spec and ``file_options`` (IsolatedPolicy options, for policy files only).
    """

    def __init__(self, spec: str, file_options: Mapping[str, Any] | None = None):
        self.spec = spec = resolve_recommended(spec)
        self._isolated: Policy | None = None
        if is_file_spec(spec) and not is_model_spec(spec):
            self._isolated = load_policy(spec, **dict(file_options or {}))

    def new(self) -> Policy:
        """The policy for the next episode."""
        return self._isolated if self._isolated is not None else load_policy(self.spec)

    def close(self) -> None:
        close = getattr(self._isolated, "close", None)
        if callable(close):
            close()


__all__ = ["MODEL_MODULES", "PolicySource", "check_policy_spec", "is_file_spec", "is_model_spec", "load_policy", "load_policy_file", "policy_from_namespace", "probe_policy_files", "resolve_in_process", "where"]
