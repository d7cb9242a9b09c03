"""The dreaming loop (docs/concepts/dreaming.md): improve the exploration policy on replay, redeploy it online.

* :mod:`~dream_gym.dream.developer`: the policy developer's interface (feedback in, revision out);
  :mod:`~dream_gym.dream.llm_developer` (an LLM through litellm, prompts in ``agents/prompts/``)
  and :mod:`~dream_gym.dream.builtin_developer` (Optuna over :mod:`~dream_gym.dream.family_policy`);
* :mod:`~dream_gym.dream.journal`: every LLM call on disk before its reply is used;
* :mod:`~dream_gym.dream.validate`: parse, interface, a short isolated episode on a tiny world;
* :mod:`~dream_gym.dream.scoring`: a version's score on the history, the determinism gate;
* :mod:`~dream_gym.dream.versions`: the files of a phase and the argmax with the incumbent;
* :mod:`~dream_gym.dream.traces`: compact replay traces for the developer;
* :mod:`~dream_gym.dream.improve`: the improvement step (``dream-gym dream``);
* :mod:`~dream_gym.dream.rsi`: the outer loop (``dream-gym rsi``);
* :mod:`~dream_gym.dream.runfolder`: durable logs, atomic files, the run's fingerprint.
"""
