"""Use a dream_gym exploration policy inside ShinkaEvolve 0.0.7 (extra ``shinka``).

``dream-gym deploy --system shinkaevolve`` (:func:`.deploy.run`) runs ShinkaEvolve's own
asynchronous runner with the parents chosen by any policy ``dream-gym eval`` takes (or
``native``: ShinkaEvolve's own parent selection) and records the run as a world folder as it
goes. How the hook works: :mod:`.bridge` (imported only when a run starts: it imports
ShinkaEvolve). The task files of the built-in tasks: :mod:`.evaluator`.
"""

from __future__ import annotations

from dream_gym.integrations.shinkaevolve.deploy import SUPPORTED_SHINKA, check_shinka, run
from dream_gym.integrations.shinkaevolve.evaluator import evaluate_file, write_task_files

__all__ = ["SUPPORTED_SHINKA", "check_shinka", "evaluate_file", "run", "write_task_files"]
