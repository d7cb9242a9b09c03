"""Lasso path: algorithm engineering with a noisy runtime metric (minimise seconds).

The candidate defines ``lasso_path(X, y, lambdas) -> coef`` of shape (len(lambdas), p) solving
``min_b (1/2n)||y - X b||^2 + lam ||b||_1`` for each lambda. Timing is done by the **parent**:

1. the harness imports numpy and the candidate, then prints ``@@READY``;
2. the parent sends a fresh random seed on stdin and starts its clock;
3. the harness builds the instance from that seed, calls ``lasso_path`` and saves the
   coefficients to ``_coef_<k>.npy``, then prints ``@@DONE <k>``;
4. the parent stops its clock once the line *and* the file are there.

A fresh seed per repeat means nothing can be precomputed at import time or cached between
repeats, and a program that patches ``time`` only fools itself. The parent rebuilds each
instance and checks the KKT conditions of every returned solution.
"""

from __future__ import annotations

import io
import os
import secrets
import time
from pathlib import Path
from typing import Any

import numpy as np

from dream_gym.infrastructure.isolation import IsolatedProcess
from dream_gym.infrastructure.limits import LeftoverError, read_leftover
from dream_gym.online.tasks.base import (
    CANDIDATE_FILE,
    HARD,
    HARNESS_TEMPLATE,
    REPAIRABLE,
    RESULT_FILE,
    Check,
    HarnessTask,
    Limits,
)

N_SAMPLES, N_FEATURES, N_LAMBDAS = 200, 500, 30
LAMBDA_MIN_RATIO = 0.05
REPEATS = 2
KKT_RTOL = 1e-3       # relative to lambda
SUPPORT_EPS = 1e-12   # |b_j| below this counts as zero
COEF_FILES = "_coef_*.npy"
#: Bytes of one repeat's coefficient file: 120,128 for (30, 500) float64 with its header; twice that.
COEF_MAX_BYTES = 2 * (N_LAMBDAS * N_FEATURES * 8 + 128)

MAKE_INSTANCE = f'''
def make_instance(seed):
    """The synthetic lasso instance of one repeat (also rebuilt by the parent for checking)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    n, p = {N_SAMPLES}, {N_FEATURES}
    X = rng.standard_normal((n, p))
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    beta = np.zeros(p)
    beta[rng.choice(p, 20, replace=False)] = rng.normal(0.0, 2.0, 20)
    y = X @ beta + 0.5 * rng.standard_normal(n)
    y = y - y.mean()
    lam_max = np.max(np.abs(X.T @ y)) / n
    lambdas = lam_max * np.geomspace(1.0, {LAMBDA_MIN_RATIO}, {N_LAMBDAS})
    return X, y, lambdas
'''
_scope: dict[str, Any] = {}
exec(MAKE_INSTANCE, _scope)  # one source of truth for parent and harness
make_instance = _scope["make_instance"]

# The import part of the generic harness, then the timed protocol loop.
_IMPORT_PART = HARNESS_TEMPLATE.split("try:\n    answer = _entry()")[0]
_TIMED_LOOP = '''
import numpy as np
print("@@READY", flush=True)
k = 0
for line in sys.stdin:
    X, y, lambdas = make_instance(int(line))
    try:
        coef = _entry(X, y, lambdas)
        coef = np.asarray(coef, dtype=float)
    except BaseException as exc:
        _fail("call", exc)
    np.save("_coef_tmp.npy", coef, allow_pickle=False)
    os.replace("_coef_tmp.npy", "_coef_%d.npy" % k)
    print("@@DONE %d" % k, flush=True)
    k += 1
_write({"ok": True, "answer": {"repeats": k}})
'''

INITIAL_PROGRAM = '''"""Lasso path by plain cyclic coordinate descent (no warm starts, no screening).

lasso_path(X, y, lambdas) returns coef of shape (len(lambdas), p) minimising
(1/2n)||y - X b||^2 + lam * ||b||_1 for each lam. The evaluator times the call and checks KKT.
"""
import numpy as np


def soft_threshold(z, t):
    return np.sign(z) * max(abs(z) - t, 0.0)


def lasso_path(X, y, lambdas, tol=1e-7, max_sweeps=1000):
    n, p = X.shape
    col_sq = (X ** 2).sum(axis=0) / n
    coef = np.zeros((len(lambdas), p))
    for k, lam in enumerate(lambdas):
        b = np.zeros(p)          # cold start at every lambda
        r = y.copy()
        for _ in range(max_sweeps):
            biggest = 0.0
            for j in range(p):
                old = b[j]
                rho = X[:, j] @ r / n + col_sq[j] * old
                new = soft_threshold(rho, lam) / col_sq[j]
                if new != old:
                    r -= X[:, j] * (new - old)
                    b[j] = new
                    biggest = max(biggest, abs(new - old))
            if biggest < tol:
                break
        coef[k] = b
    return coef
'''


def kkt_violation(X: np.ndarray, y: np.ndarray, lam: float, b: np.ndarray) -> tuple[float, int]:
    """(largest violation relative to lam, feature index) of the lasso optimality conditions."""
    grad = X.T @ (y - X @ b) / len(y)
    support = np.abs(b) > SUPPORT_EPS
    excess = np.where(support, np.abs(grad - lam * np.sign(b)), np.maximum(np.abs(grad) - lam, 0.0)) / lam
    j = int(np.argmax(excess))
    return float(excess[j]), j


class LassoPath(HarnessTask):
    """Runtime of a lasso path solver (minimise seconds, noisy), valid only when KKT holds."""

    name = "lasso-path"
    entry = "lasso_path"
    direction = "minimize"
    best_known = None
    limits = Limits(wall_s=15.0, memory_mb=1536)
    noisy = True
    description = (
        "Make a lasso path solver fast. Define lasso_path(X, y, lambdas) returning coef with shape "
        "(len(lambdas), p) where row k minimises (1/2n)||y - X b||^2 + lambdas[k] * ||b||_1. Instances are "
        f"n={N_SAMPLES}, p={N_FEATURES}, {N_LAMBDAS} decreasing lambdas from lambda_max to "
        f"{LAMBDA_MIN_RATIO} lambda_max, columns standardised, y centred; a fresh random instance per "
        f"repeat. The score is the best wall time in seconds of {REPEATS} repeats (lower is better); a "
        f"solution is valid only if the KKT conditions hold at every lambda to relative tolerance {KKT_RTOL:g}. "
        "numpy and scipy are available."
    )

    def initial_program(self) -> str:
        return INITIAL_PROGRAM

    def harness_source(self) -> str:
        head = _IMPORT_PART.format(result=RESULT_FILE, candidate=CANDIDATE_FILE, entry=self.entry)
        return head + MAKE_INSTANCE + _TIMED_LOOP

    def outputs(self) -> dict[str, int]:
        return {**super().outputs(), COEF_FILES: COEF_MAX_BYTES}

    def interact(self, child: IsolatedProcess, workdir: Path) -> dict[str, Any]:
        """Run the timed repeats; returns their seeds and parent-measured seconds."""
        for stale in workdir.glob(COEF_FILES):
            stale.unlink()
        facts: dict[str, Any] = {"seeds": [], "seconds": [], "timed": {}}
        if child.read_line(b"@@READY") is None:
            return facts
        for k in range(REPEATS):
            seed = secrets.randbelow(2**31)
            started = time.perf_counter()
            if not child.send(f"{seed}\n".encode()):
                break
            if not _wait_done(child, child.workspace_path(f"_coef_{k}.npy"), k):
                break
            facts["seconds"].append(time.perf_counter() - started)
            facts["seeds"].append(seed)
            # The coefficients judged are the ones there when the clock stopped: a candidate that
            # writes zeros, says DONE and solves at exit would otherwise be timed doing nothing.
            facts["timed"][k] = _timed_coefficients(child, k)
        return facts

    def check_with_facts(self, answer: Any, facts: dict[str, Any]) -> Check:
        seeds, seconds = facts.get("seeds", []), facts.get("seconds", [])
        if len(seconds) < REPEATS:
            return Check.fail("the harness did not complete the timed repeats", REPAIRABLE)
        worst = 0.0
        supports: list[float] = []
        for k, seed in enumerate(seeds):
            problem, violation, support = self._check_repeat(facts.get("timed", {}).get(k), k, seed)
            if problem:
                check = Check.fail(problem, HARD if "KKT" in problem else REPAIRABLE, problem,
                                   seconds=seconds, kkt_max_rel_violation=violation)
                check.parsed = {"seeds": seeds, "seconds": seconds, "kkt_max_rel_violation": violation}
                return check
            worst, supports = max(worst, violation), supports + [support]
        best = min(seconds)
        metrics = {"seconds": seconds, "best_seconds": best, "kkt_max_rel_violation": worst,
                   "mean_support": float(np.mean(supports))}
        diagnostics = (f"KKT holds at all {N_LAMBDAS} lambdas (max relative violation {worst:.2e} <= "
                       f"{KKT_RTOL:g}); times {', '.join(f'{s:.4f}' for s in seconds)} s; score = best "
                       f"{best:.4f} s; mean support size {metrics['mean_support']:.1f}")
        return Check(best, diagnostics, metrics=metrics,
                     parsed={"seeds": seeds, "seconds": seconds, "kkt_max_rel_violation": worst})

    def _check_repeat(self, timed: bytes | str | None, k: int, seed: int) -> tuple[str | None, float, float]:
        """Repeat ``k``'s coefficients as read when it was timed (their bytes, or why none were read)."""
        name = f"_coef_{k}.npy"
        shape = (N_LAMBDAS, N_FEATURES)
        if not isinstance(timed, bytes):
            return f"coefficient file {name} {timed or 'was not read when the repeat was timed'}", 0.0, 0.0
        try:
            data = timed
            found, dtype = npy_header(data)
            if found != shape:
                return f"wrong shape: expected coef {shape}, got {found}", 0.0, 0.0
            if dtype.hasobject:
                raise ValueError("an array of Python objects")
            coef = np.load(io.BytesIO(data), allow_pickle=False)
        except ValueError as exc:
            return f"unreadable coefficients of repeat {k}: {exc}", 0.0, 0.0
        if not np.isfinite(coef).all():
            return "non-finite number (nan or inf) in coef", 0.0, 0.0
        X, y, lambdas = make_instance(seed)
        worst, support = 0.0, 0.0
        for i, lam in enumerate(lambdas):
            violation, j = kkt_violation(X, y, float(lam), coef[i])
            if violation > KKT_RTOL:
                return (f"KKT violated at lambda #{i} ({lam:.4g}): feature {j} off by {violation:.2e} x lambda "
                        f"(tolerance {KKT_RTOL:g})"), violation, 0.0
            worst = max(worst, violation)
            support += float((np.abs(coef[i]) > SUPPORT_EPS).sum()) / len(lambdas)
        return None, worst, support



def npy_header(data: bytes) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """(shape, dtype) a ``.npy`` file's bytes declare, read before any array is allocated from
    them (a header may claim any shape); ValueError when they are no ``.npy`` file."""
    stream = io.BytesIO(data)
    version = np.lib.format.read_magic(stream)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(stream)
    return tuple(shape), dtype


def _timed_coefficients(child: IsolatedProcess, k: int) -> bytes | str:
    """The bytes of repeat ``k``'s coefficient file as the running child left it (through its
    sandbox's view of its folder), or what was wrong with it."""
    try:
        return read_leftover(child.workspace_path(f"_coef_{k}.npy"), COEF_MAX_BYTES)
    except LeftoverError as exc:
        return exc.problem
    except OSError as exc:
        return f"could not be read ({exc.strerror or exc})"


def _wait_done(child: IsolatedProcess, coef_path: Path, k: int) -> bool:
    """Wait for ``@@DONE k`` with something at its file's name (a forged early line is not
    enough; what is there is judged by :func:`_timed_coefficients`, which names a non-file)."""
    while True:
        line = child.read_line(b"@@DONE ")
        if line is None:
            return False
        if line.strip() == str(k).encode() and os.path.lexists(coef_path):
            return True
