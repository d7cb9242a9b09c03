"""Import a GEPA run (its ``run_dir`` with ``gepa_state.bin``) as a world.

What GEPA keeps (read in its source, github.com/gepa-ai/gepa, ``gepa/core/engine.py`` and
``gepa/core/state.py``; the state is read as plain data by :mod:`.gepa_state`): each iteration
selects a candidate, proposes a child (a reflective mutation, or a merge of two candidates), and
scores the child on a minibatch. Only a child whose minibatch score sum beats its parent's (a
merge: at least both parents') is *accepted*: scored on the validation set and added to
``program_candidates``. A *rejected* child is kept nowhere but in the iteration's entry of
``full_program_trace`` (its minibatch scores; not its text, not a validation score).

The world holds every attempt:

* each **accepted candidate** ``k`` is node ``c<k>`` (the seed ``c0`` is the root), its parent
  the first of ``parent_program_for_candidate[k]``; a merge lists both parents in ``parents``
  (tagged ``merge``, with the common ancestor GEPA merged them over). Its score is GEPA's own:
  the mean of its validation scores (``val_score``), or with ``--metric`` an objective of
  ``prog_candidate_objective_scores``; its code is its text (the component itself when there is
  one, every component under a ``### component: <name>`` line when there are several);
* each **rejected child** is an invalid node ``i<N>-rejected`` under the candidate it was
  proposed from, its error saying why (the minibatch sums compared) and its minibatch scores kept;
* each iteration whose proposal produced **no child** (the reflection call failed, or GEPA
  skipped it) is an invalid node ``i<N>-failed`` under the selected candidate, its error taken
  from GEPA's log when the run's folder holds one (``run_log.txt``, or a ``*.log`` of its output);
* the **order** is GEPA's: iteration by iteration (``round`` is GEPA's iteration number, ``i + 1``,
  the seed 0).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import (
    DEFAULT_OPTIONS,
    Importer,
    ImportOptions,
    ImportReport,
    NotARunError,
    Program,
    RunImportError,
    check_metric,
)
from .coerce import unique_name
from .files import present
from .gepa_state import STATE_NAME, GepaState, find_states, iteration_reasons, read_state
from .job import ImportJob

LABEL = "GEPA"
VAL_SCORE = "val_score"
_NOT_KEPT = "GEPA keeps neither the text nor a validation score of a rejected candidate"


def _cid(k: int | None) -> str | None:
    return None if k is None else f"c{k}"


def _total(scores: Any) -> float | None:
    if not isinstance(scores, list) or not scores:
        return None
    try:
        return float(sum(float(s) for s in scores))
    except (TypeError, ValueError):
        return None


@dataclass
class _Attempts:
    """What the trace adds to the candidates: when each was accepted, and the attempts that were not."""

    found_at: dict[int, int] = field(default_factory=dict)  # candidate -> iteration i
    minibatch: dict[int, dict[str, Any]] = field(default_factory=dict)  # candidate -> its minibatch test
    others: list[Program] = field(default_factory=list)  # rejected and failed attempts
    order: list[str] = field(default_factory=list)  # node ids in GEPA's order
    failed_rounds: set[int] = field(default_factory=set)

    def add(self, name: str, i: int, parent: int | None, error: str, extra: dict[str, Any]) -> None:
        """An attempt of iteration ``i`` that made no candidate (``name``: ``rejected`` or ``failed``),
        an invalid node under candidate ``parent``, next in GEPA's order."""
        node_id = unique_name(f"i{i + 1}-{name}", self.order)
        self.others.append(Program(id=node_id, parent=_cid(parent), score=None, round=i + 1, error=error, extra=extra))
        self.order.append(node_id)


def _tasks(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The reflective proposals of an iteration (several in GEPA >= 0.1 ``tasks``, else one)."""
    tasks = entry.get("tasks")
    if isinstance(tasks, list) and tasks:
        return [t for t in tasks if isinstance(t, dict)]
    if "selected_program_candidate" not in entry:
        return []
    task = {"parent_idx": entry.get("selected_program_candidate"), "subsample_ids": entry.get("subsample_ids"),
            "subsample_scores": entry.get("subsample_scores")}
    if "new_subsample_scores" in entry:
        task["new_subsample_scores"] = entry["new_subsample_scores"]
    return [task]


def _accepted(entry: dict[str, Any]) -> list[int]:
    indices = entry.get("new_program_indices")
    if isinstance(indices, list):
        return [k for k in indices if isinstance(k, int)]
    k = entry.get("new_program_idx")
    return [k] if isinstance(k, int) else []


def _read_trace(state: GepaState) -> _Attempts:
    attempts = _Attempts(order=["c0"])
    for entry in state.trace:
        i = entry["i"]  # an integer: gepa_state keeps no other entry
        accepted = [k for k in _accepted(entry) if 0 < k < len(state.candidates)]
        for k in accepted:
            attempts.found_at.setdefault(k, i)
        merges = [k for k in accepted if len(state.parents[k]) > 1]
        if entry.get("merged"):
            _merge_attempt(entry, i, merges, attempts)
        _reflective_attempts(entry, i, [k for k in accepted if k not in merges], state, attempts)
    return attempts


def _merge_attempt(entry: dict[str, Any], i: int, merges: list[int], attempts: _Attempts) -> None:
    entities = entry.get("merged_entities")
    if not (isinstance(entities, (list, tuple)) and len(entities) == 3 and all(isinstance(e, int) for e in entities)):
        return
    first, second, ancestor = entities
    scores = {"minibatch_score_sum": _total(entry.get("new_program_subsample_scores")),
              "parent_minibatch_score_sums": [_total(entry.get("id1_subsample_scores")),
                                              _total(entry.get("id2_subsample_scores"))]}
    if merges:
        k = merges[0]
        attempts.minibatch[k] = scores | {"merge_ancestor": _cid(ancestor), "subsample_ids": entry.get("subsample_ids")}
        attempts.order.append(f"c{k}")
        return
    attempts.add("rejected", i, first,
                 f"merge of c{first} and c{second} rejected by GEPA: its minibatch score sum "
                 f"{scores['minibatch_score_sum']} does not reach the better parent's (sums "
                 f"{scores['parent_minibatch_score_sums']}); {_NOT_KEPT}",
                 {"parents": [_cid(first), _cid(second)], "tags": ["rejected", "merge"], "metrics": scores,
                  "gepa": {"iteration": i, "merge_ancestor": _cid(ancestor), "subsample_ids": entry.get("subsample_ids")}})


def _reflective_attempts(entry: dict[str, Any], i: int, accepted: list[int], state: GepaState,
                         attempts: _Attempts) -> None:
    unmatched = list(accepted)
    for task in _tasks(entry):
        parent = task.get("parent_idx")
        parent = parent if isinstance(parent, int) else None
        before, after = _total(task.get("subsample_scores")), _total(task.get("new_subsample_scores"))
        test = {"minibatch_score_sum": after, "parent_minibatch_score_sum": before,
                "subsample_ids": task.get("subsample_ids")}
        if "new_subsample_scores" not in task:  # its error is found in the run's log later
            attempts.failed_rounds.add(i + 1)
            attempts.add("failed", i, parent, "",
                         {"tags": ["failed"], "gepa": {"iteration": i, "subsample_ids": task.get("subsample_ids")}})
            continue
        match = next((k for k in unmatched if state.parents[k][:1] == [parent]), None)
        if match is not None:
            unmatched.remove(match)
            attempts.minibatch[match] = test
            attempts.order.append(f"c{match}")
            continue
        attempts.add("rejected", i, parent,
                     f"rejected by GEPA's acceptance test: its minibatch score sum {after} does not beat its "
                     f"parent's {before} on the same {len(task.get('subsample_ids') or [])} example(s); {_NOT_KEPT}",
                     {"tags": ["rejected"], "metrics": test, "gepa": {"iteration": i}})
    for k in unmatched:  # accepted without a task naming its parent: still in GEPA's order
        attempts.order.append(f"c{k}")


def _code(candidate: dict[str, str]) -> str:
    if len(candidate) == 1:
        return next(iter(candidate.values()))
    return "\n".join(f"### component: {name}\n{text}" for name, text in candidate.items())


def _candidate_program(state: GepaState, k: int, metric: str, attempts: _Attempts) -> Program:
    value = state.val_score(k) if metric == VAL_SCORE else state.objectives[k].get(metric)
    parents = [_cid(p) for p in state.parents[k] if p is not None]
    metrics: dict[str, Any] = {VAL_SCORE: state.val_score(k), "val_examples": len(state.val_subscores[k]),
                               **state.objectives[k], **attempts.minibatch.get(k, {})}
    found = attempts.found_at.get(k)
    extra: dict[str, Any] = {"metrics": metrics, "gepa": {
        "index": k, "iteration": found, "parents": parents, "metric_calls_at_discovery": state.metric_calls[k],
        "val_subscores": state.val_subscores[k], **({"candidate": state.candidates[k]} if len(state.candidates[k]) > 1
                                                    else {"component": next(iter(state.candidates[k]))})}}
    if len(parents) > 1:
        extra["parents"], extra["tags"] = parents, ["merge"]
    error = None
    if value is None:
        error = (f"no validation score recorded (metric {metric!r})" if metric == VAL_SCORE
                 else f"metric {metric!r} missing")
    return Program(id=f"c{k}", parent=parents[0] if parents else None, score=value, error=error,
                   round=0 if k == 0 else None if found is None else found + 1, code=_code(state.candidates[k]),
                   extra=extra)


def _failure_reasons(folder: Path, attempts: _Attempts) -> None:
    reasons = iteration_reasons(folder, attempts.failed_rounds)
    for program in attempts.others:
        if program.error == "":
            said = reasons.get(program.round or -1)
            program.error = ("no candidate was evaluated in this iteration: "
                             + ("; ".join(said) if said else "the proposal failed or was skipped (GEPA's state "
                                "records no reason and no log of the run says one)"))


def _place_in_order(programs: list[Program], attempts: _Attempts) -> int:
    """GEPA's order as each node's ``order``; candidates the trace does not name follow the one before them."""
    order = list(attempts.order)
    seen = set(order)
    missing = 0
    for program in sorted((p for p in programs if p.id not in seen), key=lambda p: int(p.id[1:])):
        before = f"c{int(program.id[1:]) - 1}"
        order.insert(order.index(before) + 1 if before in order else len(order), program.id)
        missing += 1
    position = {node_id: n for n, node_id in enumerate(order)}
    for program in programs:
        program.order = float(position[program.id])
    return missing


def locate_state(src: Path) -> Path:
    """The ``gepa_state.bin`` of a GEPA run folder (or the file itself)."""
    if src.name == STATE_NAME and present(src):
        return src
    if not src.is_dir():
        raise FileNotFoundError(f"{src}: no such folder (expected a GEPA run_dir or its {STATE_NAME})")
    found = find_states(src)
    if not found:
        raise NotARunError(src, f"{src}: no GEPA state here (expected {STATE_NAME}, the file GEPA saves in its run_dir)")
    if len(found) > 1:
        raise RunImportError(f"{src}: holds {len(found)} GEPA states ({', '.join(str(p.parent.name) for p in found)}); "
                             "import each run folder on its own")
    return found[0]


def import_gepa(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    options: ImportOptions = DEFAULT_OPTIONS,
) -> ImportReport:
    """Read a GEPA run (its run_dir, or ``gepa_state.bin``) into a world."""
    src = Path(src)
    state_path = locate_state(src)
    metric = options.metric_or(VAL_SCORE)
    job = ImportJob.begin("gepa", LABEL, state_path, out, options, metric=metric)
    report = job.report
    state = read_state(state_path)
    check_metric(state_path, metric, sorted({VAL_SCORE, *(name for o in state.objectives for name in o)}),
                 what="candidate")
    attempts = _read_trace(state)
    _failure_reasons(state_path.parent, attempts)
    programs = [_candidate_program(state, k, metric, attempts) for k in range(len(state.candidates))]
    programs += attempts.others
    missing = _place_in_order(programs, attempts)
    report.files_read = report.snapshots = 1
    _note(report, state, attempts, missing)
    run_folder = src if src.is_dir() else state_path.parent
    return job.write(job.build(programs), source_path=state_path, run_name=run_folder.resolve().name)


def _note(report: ImportReport, state: GepaState, attempts: _Attempts, missing: int) -> None:
    rejected = sum(1 for p in attempts.others if "rejected" in p.extra.get("tags", []))
    failed = len(attempts.others) - rejected
    merges = sum(1 for parents in state.parents if len(parents) > 1)
    report.notes.append(
        f"GEPA: {len(state.candidates)} accepted candidate(s) ({merges} merge(s)), {rejected} rejected child(ren) and "
        f"{failed} iteration(s) without a child from {len(state.trace)} iteration(s) of the trace; "
        f"{state.total_evals if state.total_evals is not None else '?'} metric call(s) in all"
    )
    if missing:
        report.notes.append(f"{missing} accepted candidate(s) are not named by the trace: placed after the candidate "
                            "before them")
    if state.unreadable_trace:  # GEPA writes none; a state changed by hand or by another tool
        report.notes.append(f"{state.unreadable_trace} entry(ies) of full_program_trace skipped: not an iteration's "
                            "record (a dict with an integer 'i')")


def is_gepa_run(path: Path) -> bool:
    """A GEPA run folder (``gepa_state.bin`` in it or in one of its subfolders) or the state file itself."""
    if not path.is_dir():
        return path.name == STATE_NAME and present(path)
    return bool(find_states(path))


IMPORTER = Importer(label=LABEL, looks_for=f"a GEPA run_dir ({STATE_NAME})", detect=is_gepa_run, run=import_gepa)
