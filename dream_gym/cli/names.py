"""Names the user types (worlds, policies, tasks): checked before a command starts, and when one
is unknown the error is one line with the nearest known names ("did you mean ...?",
:func:`difflib.get_close_matches`) and the command that lists them, never the whole list of
names nor a quoted ``KeyError``."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from dream_gym.cli.shown import say

LIST_WORLDS = "`dream-gym worlds list` lists the datasets, `dream-gym worlds show DATASET` their worlds"


class UnknownName(LookupError):
    """A name the user typed that names nothing; the message is the whole explanation."""


def did_you_mean(name: str, known: Iterable[str], n: int = 3, show: Callable[[str], str] = str) -> str:
    """``"; did you mean 'a' or 'b'?"`` for the known names close to ``name`` (empty if none),
    each shown as ``show`` spells it (a file name with its folder, say)."""
    candidates = sorted(set(known))
    matches = difflib.get_close_matches(name, candidates, n=n, cutoff=0.6)
    if matches:  # only the ones about as close as the closest
        ratio = [difflib.SequenceMatcher(None, name, m).ratio() for m in matches]
        matches = [m for m, r in zip(matches, ratio, strict=True) if r >= ratio[0] - 0.08]
    lowered = {c.lower(): c for c in candidates}
    if not matches and name.lower() in lowered:
        matches = [lowered[name.lower()]]
    if not matches and len(name) >= 3:  # a part of a long name ("cp26-puct" for cp26-puct-w4-s1)
        matches = [c for c in candidates if name in c][:n]
    if not matches:
        return ""
    quoted = [f"'{show(m)}'" for m in matches]
    return "; did you mean " + (quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]) + "?"


# --------------------------------------------------------------------------- worlds
def _shipped_world_names() -> list[str]:
    from dream_gym.world.registry import list_worlds

    return [str(row["name"]) for row in list_worlds()]


def _dataset_ids() -> list[str]:
    from dream_gym.datasets.store import list_datasets

    return [d.id for d in list_datasets()]


def _looks_like_path(text: str) -> bool:
    return text.startswith((".", "/", "~")) or os.sep in text or text.endswith(".json")


def explain_world(part: str, exc: LookupError, single: bool = False) -> LookupError:
    """The one-line error for a world spec the library could not resolve (``single``: a spec of
    one world, so no split or dataset is suggested)."""
    from dream_gym.evaluation.world_specs import SPLIT_ALIASES, _looks_like_dataset_id

    path = Path(part).expanduser()
    if path.exists() or part in SPLIT_ALIASES:
        return exc  # the library says what is wrong with it (not a world folder, a broken dataset, ...)
    dataset_id, colon, split = part.rpartition(":")
    if colon and _looks_like_dataset_id(dataset_id):
        known_ids = _dataset_ids()
        if dataset_id not in known_ids:
            return UnknownName(f"unknown dataset {dataset_id!r}{did_you_mean(dataset_id, known_ids)} ({LIST_WORLDS})")
        return exc  # the dataset exists: the library names its splits
    if _looks_like_dataset_id(part):
        known_ids = _dataset_ids()
        hint = did_you_mean(part, known_ids)
        return UnknownName(f"{exc}{hint}") if hint else exc  # the library says how to get a dataset
    if part.count("/") >= 2 and not part.startswith((".", "/", "~")):  # ns/name-vN/<world>
        dataset_id, _, world = part.rpartition("/")
        try:
            from dream_gym.datasets.store import find_dataset

            names = list(find_dataset(dataset_id).world_names)
        except (LookupError, OSError, ValueError):
            names = []
        if names and world not in names:
            return UnknownName(f"dataset {dataset_id} has no world {world!r}{did_you_mean(world, names)} "
                               f"(`dream-gym worlds show {dataset_id}` lists its worlds)")
        if not names and _looks_like_dataset_id(dataset_id):
            from dream_gym.datasets.store import download_hint

            return UnknownName(f"unknown dataset {dataset_id!r}{did_you_mean(dataset_id, _dataset_ids())}; "
                               f"{download_hint(dataset_id)} ({LIST_WORLDS})")
        return exc
    if _looks_like_path(part):
        where = "" if str(path.resolve()) == part else f" ({path.resolve()})"
        return UnknownName(f"{'unknown world' if single else 'cannot resolve worlds'} {part!r}: "
                           f"no such folder{where}")
    if single:
        known = _shipped_world_names()
        what = "not a world folder, a shipped world or a dataset's world namespace/name-vN/<world>"
    else:
        known = [*_shipped_world_names(), *(a for a in SPLIT_ALIASES if a != "held_out"), *_dataset_ids()]
        what = "not a world folder, a shipped world, a split (train, heldout) or a dataset id namespace/name-vN"
    hint = did_you_mean(part, known)
    return UnknownName(f"unknown world {part!r}{hint or ': ' + what} ({LIST_WORLDS})")


def resolve_world_specs(spec: str, option: str = "--worlds") -> list[Any]:
    """The worlds a comma-separated spec names (as :func:`dream_gym.evaluation.world_specs.resolve_worlds`),
    each part checked on its own so that an unknown one is named with its nearest matches."""
    from dream_gym.evaluation.world_specs import resolve_worlds
    from dream_gym.world.registry import is_path

    parts = [spec] if is_path(spec) else [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise UnknownName(f"{option}: no worlds given")
    worlds: list[Any] = []
    for part in parts:
        try:
            found = resolve_worlds(part)
        except LookupError as exc:  # named with its option: --history and --validate said the same
            where = f"{option}: " if option.startswith("-") else ""
            raise UnknownName(f"{where}{explain_world(part, exc)}") from None
        worlds += [w for w in found if all(w is not seen for seen in worlds)]
        _say_newest_version(part)
    _say_unfinished(worlds)
    _say_root_only(worlds)
    return worlds


def _say_root_only(worlds: list[Any]) -> None:
    """A world of its initial program alone (a run whose every attempt failed to make a program,
    kept by an import that warned of it) scores 0 for every policy: say so, on stderr, once a
    world, since a mean over the worlds is pulled down by it (a dream's history halved)."""
    import sys

    for world in worlds:
        if world.size == 1:
            say(f"note: world {world.id} holds its initial program alone: every policy scores 0 on it, which "
                "pulls a mean over the worlds down; leave it out unless that is meant", file=sys.stderr)


def _say_unfinished(worlds: list[Any]) -> None:
    """A world folder without its checksum is not finished: a run is writing it, or stopped before
    its end. Its episodes replay what it holds so far, which a figure on it should say: say so, on
    stderr, once a world."""
    import sys

    from dream_gym.infrastructure.locks import folder_lock

    for world in worlds:
        if world.path is None or world.meta.get("sha256"):
            continue
        holder = folder_lock(world.path).holder()
        state = (f"a run is writing it (pid {holder.get('pid')})" if holder
                 else "its run stopped before its end; --resume of that run finishes it")
        say(f"note: world {world.id} is not finished ({state}): it is replayed as the {world.size - 1} "
            "attempts it holds so far", file=sys.stderr)


def _say_newest_version(part: str) -> None:
    """A dataset named without its version is its newest: say which, on stderr, so that a result
    says the version it was measured on (``dream-gym/recorded`` is ``dream-gym/recorded-v1``)."""
    import sys

    from dream_gym.datasets.ids import DatasetIdError, DatasetName, parse_dataset_ref
    from dream_gym.world.registry import is_path

    if is_path(part):
        return
    try:
        ref = parse_dataset_ref(part)
    except DatasetIdError:
        return
    if isinstance(ref, DatasetName):
        from dream_gym.datasets.store import find_dataset

        say(f"note: {part} is {find_dataset(part).id}, its newest version here", file=sys.stderr)


def resolve_one_world(ref: str) -> Any:
    """One world (a folder, a shipped world, ``ns/name-vN/<world>``), as
    :func:`dream_gym.world.registry.resolve_world`, with the one-line error of an unknown one."""
    from dream_gym.world.registry import resolve_world

    try:
        return resolve_world(ref)
    except LookupError as exc:
        raise explain_world(ref, exc, single=True) from None


def show_target(target: str) -> str:
    """What ``dream-gym worlds show`` is given: a dataset id, a world reference ns/name-vN/<world>
    or a folder; a shipped world's bare name becomes its reference; an unknown one is UnknownName
    with the nearest references."""
    from dream_gym.evaluation.world_specs import _looks_like_dataset_id
    from dream_gym.world.registry import is_path, list_worlds

    if is_path(Path(target).expanduser(), "exists") or "/" in target or _looks_like_dataset_id(target):
        return target
    rows = list_worlds()
    refs = {str(r["name"]): f"{r['dataset']}/{r['name']}" for r in rows if r.get("dataset")}
    if target in refs:
        return refs[target]
    known = [*refs.values(), *refs, *_dataset_ids()]
    hint = did_you_mean(target, known)
    raise UnknownName(f"unknown world or dataset {target!r}{hint or ': not a folder, a dataset id or a world'} "
                      f"({LIST_WORLDS})")


def recorded_w(worlds: Sequence[Any]) -> str:
    """``"4"`` or ``"4-8"``: the W the worlds were recorded at."""
    ws = sorted({int(w.workers) for w in worlds})
    if not ws:
        return "?"
    return str(ws[0]) if len(ws) == 1 else f"{ws[0]}-{ws[-1]}"


def worlds_count(worlds: Sequence[Any]) -> str:
    return f"{len(worlds)} world{'s' if len(worlds) != 1 else ''}"


def w_note(worlds: Sequence[Any], workers: int | None) -> str:
    """How the worlds are replayed: ``"at W = 2"`` or ``"at each world's recorded W (4-8)"``."""
    if workers is not None:
        return f"at W = {workers}"
    ws = recorded_w(worlds)
    if "-" not in ws:
        return f"at W = {ws} (the recorded W of {'every world' if len(worlds) > 1 else 'the world'})"
    return f"at each world's recorded W ({ws})"


def betas_note(betas: Sequence[float]) -> str:
    """``"0,0.1,...,1"`` for an even grid of more than four, else every beta: ``"0.1,0.9"``."""
    values = [float(b) for b in betas]
    if len(values) > 4:
        steps = {round(b - a, 9) for a, b in zip(values, values[1:], strict=False)}
        if len(steps) == 1:
            return f"{values[0]:g},{values[1]:g},...,{values[-1]:g}"
    return ",".join(f"{b:g}" for b in values)


# --------------------------------------------------------------------------- policies
def check_policy(spec: str) -> str:
    """``spec`` if it can name a policy; UnknownName (with the nearest names) if it cannot."""
    from dream_gym.policies import POLICIES
    from dream_gym.policies.recommended import NAME as RECOMMENDED
    from dream_gym.policies.trained import SHIPPED_MODELS
    from dream_gym.policy_files.specs import PolicySpec

    parsed = PolicySpec.of(spec)  # parameters that are no KEY=VALUE pairs are named here
    kind = parsed.kind
    if kind in ("module", "model") and parsed.params:
        parsed.check()  # a parameter the class or model does not take, or a flag neither true nor false
    if kind in ("module", "model") or spec == RECOMMENDED:
        return spec  # module:attr, model zips and recommended: the library names a missing module or file
    if parsed.name in POLICIES:
        parsed.check()  # with parameters: one the built-in does not take, or a value of the wrong kind
        return spec
    if spec not in POLICIES and Path(spec).expanduser().is_dir():
        raise UnknownName(f"policy {spec} is a folder; a policy is a .py file, a model .zip, module:Class or a "
                          "built-in's name")
    if kind == "file":
        path = Path(spec).expanduser()
        if path.is_file():
            return spec
        folder = path.parent if path.parent.is_dir() else None
        nearby = [p.stem for p in sorted(folder.glob("*.py"))] if folder is not None else []
        # names compared without their folder and their ".py", which every candidate shares (a long
        # path made any file of the folder look close, and ".py" made missing.py crashing.py's
        # near name); the hint gives the path as the user would type it
        hint = did_you_mean(path.stem, nearby,
                            show=lambda stem: f"{stem}.py" if str(path.parent) == "." else
                            str(Path(spec).parent / f"{stem}.py"))
        where = "" if folder is not None else f" (no folder {str(path.parent)!r})"
        raise UnknownName(f"policy file {spec} does not exist{where}{hint}")
    if spec in POLICIES:
        return spec
    known = [*POLICIES, *SHIPPED_MODELS, RECOMMENDED]
    if Path(spec + ".py").is_file():
        known.append(spec + ".py")
    hint = did_you_mean(parsed.name, known)
    raise UnknownName(
        f"unknown policy {parsed.name!r}{hint} (built-ins: {', '.join(sorted(POLICIES))}; shipped models: "
        f"{', '.join(SHIPPED_MODELS)}; {RECOMMENDED}; or module:Class, a .py policy file or a model .zip)"
    )


def check_policies(specs: Sequence[str]) -> list[str]:
    return [check_policy(s) for s in specs]


def check_loads(spec: str, **limits: Any) -> str:
    """:func:`check_policy`, then a policy file loaded once in its sandbox: one that does not load
    (a syntax error, a failing import) fails here naming its file, before a run folder is made."""
    from dream_gym.policy_files import probe_policy_files

    probe_policy_files([check_policy(spec)], **limits)
    return spec


def check_incumbent(spec: str, **limits: Any) -> str:
    """:func:`check_loads`, then, for an incumbent given as a built-in or ``module:Class``, its
    version-0 wrapper loaded once in the sandbox, where every version runs: a module the sandbox
    cannot read (one on PYTHONPATH, outside the installed packages) fails here, not as a version
    that scores 0 in every episode while the run goes on."""
    import tempfile

    from dream_gym.dream.versions import incumbent_source
    from dream_gym.policy_files import PolicyLoadError, probe_policy_files
    from dream_gym.policy_files.specs import PolicySpec

    check_loads(spec, **limits)
    parsed = PolicySpec.of(spec)
    if parsed.kind not in ("module", "builtin"):
        return spec
    with tempfile.TemporaryDirectory(prefix="dream-gym-incumbent-") as folder:
        wrapper = Path(folder) / "incumbent.py"
        wrapper.write_text(incumbent_source(spec)[0], encoding="utf-8")
        try:
            probe_policy_files([str(wrapper)], **limits)
        except PolicyLoadError as exc:
            said = str(exc).replace(str(wrapper), "its wrapper")
            hint = ("; install the package that holds it (pip install -e .), or give the policy as a .py file"
                    if "ModuleNotFoundError" in said else "")
            raise PolicyLoadError(f"incumbent {spec}: every version runs isolated, and its version-0 wrapper does "
                                  f"not load there ({said}){hint}") from None
    return spec


# --------------------------------------------------------------------------- tasks
def check_task(name: str) -> str:
    """``name`` if it is a registered task; UnknownName with the nearest names if not."""
    from dream_gym.online.tasks import TASKS, list_tasks

    if name in TASKS:
        return name
    if "," in name or name.endswith(".py"):  # initial_program.py,evaluator.py: a discovery system's task
        raise UnknownName(
            f"--task {name}: a task given as files runs in a discovery system (dream-gym deploy --system "
            f"openevolve|shinkaevolve|skydiscover, or rsi --system); dream_gym's own loop runs a built-in task "
            f"({', '.join(sorted(list_tasks()))})"
        )
    raise UnknownName(f"unknown task {name!r}{did_you_mean(name, TASKS)} (tasks: {', '.join(sorted(list_tasks()))})")


__all__ = ["UnknownName", "betas_note", "check_policies", "check_policy", "check_task", "did_you_mean", "explain_world",
           "recorded_w", "resolve_one_world", "show_target", "resolve_world_specs", "w_note", "worlds_count"]
