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
* a trained stable-baselines3 model ``.zip``, or the name of a shipped one (``ppo-macro-v``:
  :data:`dream_gym.policies.trained.SHIPPED_MODELS`): :func:`dream_gym.rl.model_policy`
  (macro or node-level, read off the model), in-process; zips joined by ``+``
  (``a.zip+b.zip+c.zip``) are a seed ensemble (:class:`dream_gym.rl.ensemble.EnsemblePolicy`);
* ``recommended``: the spec :mod:`dream_gym.policies.recommended` names (one of the kinds above).

A built-in name or ``module:Class`` may carry constructor parameters, ``greedy(patience=10)``
or ``my_pkg.agents:Beam(width=4, rule=ucb)``, and a model its flag,
``ppo-options-v(deterministic=false)``: comma-separated ``KEY=VALUE`` pairs, each value a whole
number, a decimal number or else text (which may hold commas: ``coverage(deepen=0.3,1)``), read
as ``--policy-arg`` reads them. The spec with its parameters labels the results, so one
evaluation can compare ``greedy(patience=3)`` with ``greedy(patience=10)``. A policy file takes
none (its own ``make_policy()`` builds its policy).

:class:`PolicySpec` reads a spec once (its kind, and what ``recommended`` stands for); every
entry point goes through it. :func:`~dream_gym.policy_files.inprocess.resolve_in_process` builds the policy object of a spec
in the current process; the parent uses it for trusted specs, the isolated child
(:mod:`dream_gym.policy_files.child`) for the file it was started for.
"""

from __future__ import annotations

import contextlib
import inspect
import keyword
import os
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dream_gym.infrastructure.extras import install_command
from dream_gym.policies import POLICIES
from dream_gym.policies.recommended import resolve as resolve_recommended
from dream_gym.policies.trained import SHIPPED_MODELS
from dream_gym.policy import Policy
from dream_gym.policy_files.errors import PolicyLoadError, PolicyNotFoundError
from dream_gym.policy_files.inprocess import (
    is_file_spec,
    load_policy_file,
    module_attr,
    policy_from_namespace,
    resolve_in_process,
    where,
)
from dream_gym.policy_files.isolated import IsolatedPolicy

PolicyKind = Literal["builtin", "module", "file", "model"]


@dataclass(frozen=True)
class PolicySpec:
    """One ``--policy`` string, read once: what it names and how that policy loads.

    Every entry point (:func:`load_policy`, :func:`check_policy_spec`, :class:`PolicySource`,
    evaluation, the CLI) reads a spec through :meth:`of`, so ``recommended`` and the kinds are
    resolved in this one place.

    Attributes:
        given: the string as the user gave it; it labels the results (``recommended`` stays
            ``recommended``).
        target: the spec it stands for (``recommended`` replaced by the spec it names), its
            parameters included.
        kind: ``builtin`` (a name of :data:`dream_gym.policies.POLICIES`), ``module``
            (``module:attr``, trusted code imported in-process), ``file`` (a ``.py`` path,
            untrusted: run isolated by default) or ``model`` (an SB3 ``.zip``, zips joined by
            ``+``, or a shipped model's name).
        name: ``target`` without its parameters: the built-in's name, ``module:attr``, the file
            or the model.
        params: the constructor parameters written in the spec, as (key, value) pairs.
    """

    given: str
    target: str
    kind: PolicyKind
    name: str
    params: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, spec: str | os.PathLike[str] | PolicySpec) -> PolicySpec:
        if isinstance(spec, PolicySpec):
            return spec
        given = os.fspath(spec)
        written, params = split_parameters(given)
        name = resolve_recommended(written)
        target = name if written == given else name + given[given.index("("):]
        return cls(given, target, _kind(name), name, tuple(params.items()))

    @property
    def in_watched_process(self) -> bool:
        """Trusted code of unknown cost (``module:attr``, a model) keeps a job process's
        watchdog: evaluation never runs it in its own process to save a start."""
        return self.kind in ("module", "model")

    def model_files(self) -> list[Path]:
        """The zips of a model spec (a file whose name holds ``+`` is itself, not an ensemble);
        PolicyNotFoundError naming a missing one."""
        if self.kind != "model":
            raise ValueError(f"{self.given} is a {self.kind} spec, not a model")
        target = self.name
        if target in SHIPPED_MODELS:
            from dream_gym.policies.trained import shipped_files

            try:
                return shipped_files(target)
            except FileNotFoundError as exc:
                raise PolicyNotFoundError(str(exc)) from None
        paths = [Path(target)] if Path(target).is_file() else [Path(part) for part in target.split("+")]
        for path in paths:
            if not path.name.endswith(".zip"):
                raise PolicyNotFoundError(f"{target}: an ensemble joins model zips with '+', and {path} is no .zip")
            if not path.is_file():
                raise PolicyNotFoundError(f"model file {path} does not exist")
        return paths

    def files(self) -> list[Path]:
        """What the policy loads from disk: a model's zips, or the policy file; none for a name
        or a module (the digest of a run's identity hashes these)."""
        if self.kind == "model":
            return self.model_files()
        if self.kind == "file" and Path(self.target).is_file():
            return [Path(self.target)]
        return []

    def check(self) -> None:
        """Raise :class:`PolicyNotFoundError` when the spec names nothing: an unknown built-in
        name, a missing file, module or attribute. Builds nothing (no model is loaded, no child
        started, no constructor runs)."""
        if self.kind == "model":
            self.model_files()
            model_parameters(self.name, dict(self.params), self.given)
        elif self.kind == "file":
            if not Path(self.target).is_file():
                raise PolicyNotFoundError(f"policy file {self.target} does not exist")
        elif self.kind == "module":
            obj = module_attr(self.name)
            if self.params:
                self._check_parameters(obj)
        elif self.name not in POLICIES:
            resolve_in_process(self.name, {})  # raises the error that lists the built-in names
        elif self.params:
            resolve_in_process(self.name, dict(self.params))  # a built-in checks its values when built

    def _check_parameters(self, obj: Any) -> None:
        """A ``module:Class(...)`` spec whose class does not take its parameters fails here,
        before any episode, without building the policy (its constructor is trusted code of
        unknown cost)."""
        if not isinstance(obj, type):
            raise ValueError(f"policy {self.given!r}: {self.name} is not a class; parameters cannot be passed")
        try:
            inspect.signature(obj).bind(**dict(self.params))
        except TypeError as exc:
            raise ValueError(f"policy {self.given!r}: {exc}") from None
        except ValueError:  # no signature to read (a class built in C): its constructor will say
            pass

    def load(self, *, isolate: bool | None = None, params: Mapping[str, Any] | None = None,
             **limits: Any) -> Policy:
        """The policy: see :func:`load_policy`."""
        params = self._with_parameters(params)
        if self.kind == "model":  # read as data (dream_gym.rl.model_zips), in-process
            if isolate or limits:
                raise ValueError(f"{self.name}: SB3 models load in-process only (no isolate=True, no limits)")
            policy = _model_policy(self.name, self.model_files(), params, given=self.given)
        else:
            if self.kind == "file" and not Path(self.target).is_file():
                raise PolicyNotFoundError(f"policy file {self.target} does not exist")
            if self.kind == "file" and params:  # a file's policy is built by its own make_policy()
                raise ValueError(f"policy file {self.target}: parameters cannot be passed to a file's policy")
            if isolate is None:
                isolate = self.kind == "file"
            if not isolate:
                if limits:
                    raise ValueError(f"limits {sorted(limits)} only apply to isolated policies (isolate=True)")
                policy = resolve_in_process(self.name, params)
            else:
                if self.kind == "builtin":
                    resolve_in_process(self.name, params)  # fail fast on unknown names, in the parent
                policy = IsolatedPolicy(self.name, params=params, **limits)
        if self.given != self.name:  # recommended, or parameters: labelled as the user gave it
            with contextlib.suppress(AttributeError):
                policy.name = self.given  # type: ignore[attr-defined]
        return policy

    def _with_parameters(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """The spec's parameters and ``params`` (``--policy-arg``) together; a key given both
        ways with two values is an error naming it."""
        merged = dict(self.params)
        for key, value in (params or {}).items():
            if key in merged and merged[key] != value:
                raise ValueError(f"policy {self.given!r}: {key} is given twice ({merged[key]!r} in the spec, "
                                 f"{value!r} as a parameter)")
            merged[key] = value
        return merged


def parameter_value(text: str) -> int | float | str:
    """A parameter's value as written: a whole number, else a decimal number, else the text."""
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


_PARAMETERS = re.compile(r"(?P<name>[^()]+)\((?P<pairs>[^()]*)\)")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: A comma that begins the next KEY=VALUE pair: a value may hold commas itself (deepen=0.3,1).
_PAIR_START = re.compile(r",(?=\s*[A-Za-z_][A-Za-z0-9_]*\s*=)")


def split_parameters(spec: str) -> tuple[str, dict[str, Any]]:
    """``"greedy(patience=10, min_branches=2)"`` → ``("greedy", {"patience": 10, "min_branches": 2})``;
    a spec without parameters and a policy file come back as they are; a file with parameters is
    refused (its own ``make_policy()`` builds its policy), a model takes its options so
    (``ppo-macro-v(deterministic=false)``)."""
    match = _PARAMETERS.fullmatch(spec)
    if match is None:
        if "(" in spec and not is_file_spec(spec) and not Path(spec).exists():
            raise PolicyNotFoundError(f"policy {spec!r}: parameters are written name(KEY=VALUE, ...), "
                                      "as in greedy(patience=10)")
        return spec, {}
    if is_file_spec(match["name"]) and _kind(match["name"].strip()) != "model":
        if Path(spec).exists():  # a file whose name ends in parentheses
            return spec, {}
        raise PolicyNotFoundError(f"policy {spec!r}: parameters cannot be passed to a file's policy (its "
                                  "make_policy() builds it)")
    params: dict[str, Any] = {}
    for pair in filter(None, (part.strip() for part in _PAIR_START.split(match["pairs"].strip().rstrip(",")))):
        key, sep, text = (part.strip() for part in pair.partition("="))
        if not sep or not _KEY.fullmatch(key) or keyword.iskeyword(key):
            raise PolicyNotFoundError(f"policy {spec!r}: parameters are KEY=VALUE pairs separated by commas, "
                                      f"as in greedy(patience=10); {pair!r} is not one")
        if key in params:
            raise PolicyNotFoundError(f"policy {spec!r}: {key} is given twice")
        params[key] = parameter_value(text)
    return match["name"].strip(), params


def recorded_policy(policy: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A run's policy as a resume compares it: the spec without its parameters, and its
    parameters with ``params`` (``--policy-arg``), so that ``greedy(patience=2)`` and ``greedy``
    with ``patience=2`` are one run (a key given both ways with two values was refused at the start)."""
    try:
        written, inline = split_parameters(policy)
    except PolicyNotFoundError:  # no spec a run could have started with: compared as written
        return policy, dict(params)
    return written, {**inline, **params}


def with_recorded_policy(meta: Mapping[str, Any]) -> dict[str, Any]:
    """``meta`` (world.json, or a run's settings by world.json's keys) with its ``policy`` and
    ``policy_params`` as :func:`recorded_policy` gives them; ``policy_params`` stays absent where
    the world records none and the spec holds none (a world written before they were recorded)."""
    out = dict(meta)
    if isinstance(policy := out.get("policy"), str):
        params = out.get("policy_params")
        written, merged = recorded_policy(policy, params if isinstance(params, Mapping) else {})
        out["policy"] = written
        if "policy_params" in out or merged:
            out["policy_params"] = merged
    return out


def _kind(target: str) -> PolicyKind:
    if target.endswith(".zip") or target in SHIPPED_MODELS:
        return "model"
    if is_file_spec(target):
        return "file"
    return "module" if ":" in target else "builtin"


def check_policy_spec(spec: str | os.PathLike[str]) -> None:
    """Raise :class:`PolicyNotFoundError` when ``spec`` names nothing (:meth:`PolicySpec.check`),
    so a parent can check specs that only its workers will build."""
    PolicySpec.of(spec).check()


def probe_policy_files(specs: Sequence[str | os.PathLike[str]], **limits: Any) -> None:
    """Load each policy file of ``specs`` once, in its sandbox, and close it: a file that does
    not load (a syntax error, an import that fails, no policy defined) raises its
    :class:`PolicyLoadError` here, once, before a grid runs its episodes (which would each
    report it); so does a trained model where the rl extra is not installed. Other specs are
    left to :func:`check_policy_spec`."""
    for spec in map(PolicySpec.of, specs):
        if spec.kind == "file":
            IsolatedPolicy(spec.target, **limits).close()
        elif spec.kind == "model" and (missing := missing_rl_package()) is not None:
            raise _needs_rl(spec.target, spec.given, missing)


def load_policy(spec: str | os.PathLike[str] | PolicySpec, *, isolate: bool | None = None,
                params: Mapping[str, Any] | None = None, **limits: Any) -> Policy:
    """A policy from a built-in name, ``module:attr``, a ``.py`` file path, or a trained
    stable-baselines3 model: a ``.zip`` or a shipped model's name (``ppo-macro-v``),
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
    return PolicySpec.of(spec).load(isolate=isolate, params=params, **limits)


#: What a trained model's policy imports (torch, SB3, sb3-contrib: seconds): a job pool whose
#: tasks run models names them for its fork server to import once, instead of every job. (Its
#: optimizer is not built, so torch._dynamo is not among them: dream_gym.rl.acting_model.)
MODEL_MODULES = ("sb3_contrib", "dream_gym.rl.archs", "dream_gym.rl.ensemble", "dream_gym.rl.node_policy")


def is_model_spec(spec: str) -> bool:
    """A trained model: a ``.zip``, zips joined by ``+`` (a seed ensemble) or a shipped model's name."""
    return PolicySpec.of(spec).kind == "model"


def model_files(spec: str) -> list[Path]:
    """The zips of a model spec (:meth:`PolicySpec.model_files`)."""
    return PolicySpec.of(spec).model_files()


def _model_policy(spec: str, paths: list[Path], params: Mapping[str, Any], given: str | None = None) -> Policy:
    """One model's policy (:func:`dream_gym.rl.model_policy`), or the ensemble of several
    (``given``: the spec as the user gave it, when another name stood for it)."""
    params = model_parameters(spec, params, given)
    try:
        return _built_model_policy(spec, paths, params)
    except ModuleNotFoundError as exc:  # the rl extra's packages are imported only now, lazily
        if (exc.name or "").partition(".")[0] not in RL_PACKAGES:
            raise
        raise _needs_rl(spec, given, str(exc.name)) from None


def model_parameters(spec: str, params: Mapping[str, Any], given: str | None = None) -> dict[str, Any]:
    """A model's parameters checked, before the rl stack is imported: a built-in's parameter given
    to a model (``recommended``) is refused naming the one a model takes; a flag written
    ``false`` is False."""
    named = spec if given in (None, spec) else f"{given} ({spec})"
    unknown = sorted(set(params) - set(MODEL_PARAMS))
    if unknown:
        raise ValueError(f"policy {named!r} is a trained model, which takes no parameter {unknown[0]!r}; its "
                         f"parameter: {', '.join(MODEL_PARAMS)} (true or false)")
    return {key: _true_or_false(value, f"policy {named!r}: {key}") for key, value in params.items()}


#: What a trained model's policy takes (``--policy-arg``): the most likely action, or a sampled one.
MODEL_PARAMS = ("deterministic",)


def _true_or_false(value: Any, what: str) -> bool:
    """A flag as a command line writes it (``false``; ``bool("false")`` is True) or as Python does."""
    import numpy as np  # here: this module loads where numpy need not

    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    words = {"true": True, "false": False, "1": True, "0": False}
    if isinstance(value, (str, int)) and str(value).strip().lower() in words:
        return words[str(value).strip().lower()]
    raise ValueError(f"{what} must be true or false, got {value!r}")

#: The packages of the ``rl`` extra, which a trained model's policy imports.
RL_PACKAGES = frozenset({"torch", "stable_baselines3", "sb3_contrib"})


def missing_rl_package() -> str | None:
    """The first package of the rl extra that is not installed (found without importing it)."""
    import importlib.util

    return next((name for name in sorted(RL_PACKAGES) if importlib.util.find_spec(name) is None), None)


def _needs_rl(spec: str, given: str | None, missing: str) -> PolicyLoadError:
    named = spec if given in (None, spec) else f"{given} ({spec})"
    return PolicyLoadError(f"policy {named!r} is a trained model, which needs the rl extra: "
                           f"{install_command('rl')} (no module {missing!r})")


def _built_model_policy(spec: str, paths: list[Path], params: Mapping[str, Any]) -> Policy:
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
      ``reset`` runs in a new process forked from its template (its own guarantee), and for
      episodes played side by side (:meth:`side_by_side`) one such policy, with its own
      template, for each;
    * a built-in or ``module:Class``: :meth:`new` builds a new object (a module's globals and
      class attributes are trusted code's business: they are not reset);
    * a model: its zips are loaded once per process, and :meth:`new` wraps them in a new policy.

    Args: the spec and ``file_options`` (IsolatedPolicy options, for policy files only).
    """

    def __init__(self, spec: str | PolicySpec, file_options: Mapping[str, Any] | None = None):
        self.policy_spec = PolicySpec.of(spec)
        self.spec = self.policy_spec.target
        # what each episode's policy is built from, read once: the target, so that a built-in that
        # recommended stands for keeps its own name, and parameters label it as written
        self._each_episode = PolicySpec.of(self.spec)
        self.file_options = dict(file_options or {})
        self._isolated: list[Policy] = []
        if self.policy_spec.kind == "file":
            self._isolated.append(self.policy_spec.load(**self.file_options))

    @property
    def untrusted(self) -> bool:
        """Whether its episodes run untrusted code in the sandbox (a policy file, unless told
        ``isolate=False``)."""
        return bool(self._isolated) and getattr(self._isolated[0], "untrusted", False)

    def new(self) -> Policy:
        """The policy for the next episode."""
        if not self._isolated:
            return self._each_episode.load()
        if self.untrusted:  # played alone again
            self._isolated[0].side_by_side = 1  # type: ignore[attr-defined]
        return self._isolated[0]

    def side_by_side(self, count: int) -> list[Policy]:
        """``count`` policies for episodes played side by side, each its own sandboxed process
        group, running (an untrusted source's; they are started together and kept for the next
        call). One template cannot serve two episodes at once: each plays its episodes one
        after another."""
        if not self.untrusted:
            raise ValueError(f"{self.spec}: only untrusted policy files play episodes side by side")
        missing = count - len(self._isolated)
        if missing > 0:
            with ThreadPoolExecutor(missing, thread_name_prefix="dream_gym-template") as starting:
                started = [starting.submit(self.policy_spec.load, **self.file_options) for _ in range(missing)]
            try:
                self._isolated.extend(future.result() for future in started)
            finally:  # one failed to start: the others it started are ended, not kept half-made
                for future in started:
                    if future.exception() is None and future.result() not in self._isolated:
                        _close(future.result())
        for policy in self._isolated[:count]:
            policy.side_by_side = count  # type: ignore[attr-defined]
            policy.prepare()  # type: ignore[attr-defined]
        return self._isolated[:count]

    def forget_output(self) -> None:
        """Drop what the policy's processes printed so far (it moves on to another world)."""
        for policy in self._isolated:
            getattr(policy, "forget_output", lambda: None)()

    def close(self) -> None:
        while self._isolated:
            _close(self._isolated.pop())


def _close(policy: Policy) -> None:
    close = getattr(policy, "close", None)
    if callable(close):
        close()


__all__ = ["MODEL_MODULES", "PolicyKind", "PolicySource", "PolicySpec", "check_policy_spec", "is_file_spec", "is_model_spec", "load_policy", "load_policy_file", "parameter_value", "policy_from_namespace", "probe_policy_files", "recorded_policy", "resolve_in_process", "split_parameters", "where", "with_recorded_policy"]
