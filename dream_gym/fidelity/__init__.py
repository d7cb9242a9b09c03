"""How far to trust replay: fidelity (docs/results/fidelity.md).

* :mod:`.reproduce`: replaying the recording policy on its own world gives back the recorded tree.
* :mod:`.stats`: rank correlations, bootstrap intervals over seeds, split-half reliability.
* :mod:`.study`: ``dream-gym fidelity``: run policies online, record worlds, replay every policy
  on them, and say how well replay ranks the policies against the online runs.
* :mod:`.config`: a study's settings, its recorders (runs or pools) and its identity.
* :mod:`.analysis`: the analysis: every policy replayed on every recorder's worlds, the rankings
  compared with the online runs' (the report of ``fidelity.json``).
"""

from dream_gym.fidelity.reproduce import (
    RecordedSetting,
    Reproduction,
    decisions_match,
    recorded_setting,
    reproduce,
    stored_in_slot_order,
)

__all__ = ["RecordedSetting", "Reproduction", "decisions_match", "recorded_setting", "reproduce",
           "stored_in_slot_order"]
