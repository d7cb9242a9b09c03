"""The Gymnasium envs over replay: the single env, the vector env, their ids and registration, and the
tree image observation."""
