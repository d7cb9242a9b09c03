"""Bridges between dream_gym and the discovery systems users run (extras, imported lazily).

* :mod:`dream_gym.integrations.deploy`: the one verb (``dream-gym deploy --system S``) and the
  registry of the systems' bridges;
* :mod:`dream_gym.integrations.openevolve` (extra ``openevolve``): run OpenEvolve 0.4 with a
  dream_gym exploration policy choosing the parents, recorded as a world as it goes.
"""
