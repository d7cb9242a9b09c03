"""Use a dream_gym exploration policy inside SkyDiscover 0.1 (extra ``skydiscover``).

``dream-gym deploy --system skydiscover`` (:func:`.run.run_skydiscover`) runs SkyDiscover with the parents
chosen by any policy ``dream-gym eval`` takes, on the searches whose parent choice is a
``ProgramDatabase.sample()`` (:data:`.run.BACKENDS`: topk, best_of_n, beam_search, adaevolve),
and records the run as a world folder as it goes. How the hook works: :mod:`.bridge` (imported
only when a run starts: it needs SkyDiscover). The evaluator files of the built-in tasks:
:mod:`.evaluator`. A SkyDiscover output folder imports with ``dream-gym worlds import``
(:mod:`dream_gym.datasets.importers.skydiscover`).
"""

from __future__ import annotations

from dream_gym.integrations.skydiscover.evaluator import evaluate_program, write_task_files
from dream_gym.integrations.skydiscover.run import (
    BACKENDS,
    OPTIONS,
    SUPPORTED_SKYDISCOVER,
    check_search,
    check_skydiscover,
    run_skydiscover,
)

__all__ = ["BACKENDS", "OPTIONS", "SUPPORTED_SKYDISCOVER", "check_search", "check_skydiscover", "evaluate_program",
           "run_skydiscover", "write_task_files"]
