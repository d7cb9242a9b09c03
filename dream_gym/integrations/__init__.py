"""Bridges between dream_gym and the discovery systems users run (extras, imported lazily).

* :mod:`dream_gym.integrations.deploy`: the one verb (``dream-gym deploy --system S``) and the
  registry of the systems' bridges;
* :mod:`dream_gym.integrations.openevolve` (extra ``openevolve``),
  :mod:`dream_gym.integrations.shinkaevolve` (extra ``shinka``) and
  :mod:`dream_gym.integrations.skydiscover` (extra ``skydiscover``): run each system with a
  dream_gym exploration policy choosing the parents, recorded as a world as it goes; each holds
  its hooks (``bridge``), the record of a run (``state``), its run and its evaluator files;
* what the bridges share: the frame of a run (:mod:`.world_run`: version check, the world folder
  under its lock, the agent server, the policy, the summary), the policy's side of a run
  (:mod:`.bridge_state`), the evaluator files (:mod:`.evaluator_files`) and a task given as
  files, evaluated in dream_gym's sandbox (:mod:`.files_task`, its harness :mod:`.files_harness`).
"""
