"""Training RL models on replay: ``dream-gym train`` (checkpoints, resume, TensorBoard logs, held-out
evaluation) and the Gymnasium training envs registered as ``DreamGym/Macro-v0``, ``Node-v0`` and
``Options-v0``."""
