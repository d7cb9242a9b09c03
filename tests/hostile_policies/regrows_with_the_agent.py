"""Hostile: re-grows the world with dream_gym's own built-in agent, which grew every shipped world.
A node's program is the agent's proposal from its parent's branch with the generator seeded by
(the world's small seed, round, slot), so a policy that runs the agent can tell when the recording
made each revealed node, and predict the nodes replay has not revealed. It imports the agent and
the task (or, failing that, reads the agent's source), reveals the root's first children, and
reports by raising ``FOUND=<json>``: ``imported`` (the agent and task modules loaded), ``source``
(the agent's file could be read), ``reproduced`` (revealed children whose code the agent made
again). Isolated, all three must be false or 0."""

import json
import os

try:
    import numpy as np

    import dream_gym.online.agents
    import dream_gym.online.agents.sum_difference
    import dream_gym.online.real_tree
    import dream_gym.online.tasks
    import dream_gym.online.tasks.sum_difference  # noqa: F401 - imported ahead: an episode imports nothing
    from dream_gym.online.agents import builtin_agent
    from dream_gym.online.real_tree import parent_context
    from dream_gym.online.tasks import get_task

    IMPORTED = True
except Exception:  # noqa: BLE001 - the sandbox refused: say so below
    IMPORTED = False


def _source_readable():
    import dream_gym

    path = os.path.join(os.path.dirname(dream_gym.__file__), "online", "agents", "sum_difference.py")
    try:
        with open(path, "rb") as f:
            return len(f.read(64)) > 0
    except OSError:
        return False


SOURCE = _source_readable()


def _reproduced(view, context):
    if not IMPORTED:
        return 0
    task, agent = get_task(context.task_name), builtin_agent(context.task_name)
    records = [{"id": n.id, "parent": n.parent, "score": n.score, "code": n.code, "diagnostics": n.diagnostics,
                "error": n.error, "fail_class": n.fail_class} for n in view.nodes]
    index = {r["id"]: i for i, r in enumerate(records)}
    found = 0
    for node in view.nodes:
        if node.parent is None:
            continue
        context_of_parent = parent_context(records, index, index[node.parent])
        found += any(agent.propose(task, context_of_parent, np.random.default_rng([seed, 1, slot])).code == node.code
                     for seed in range(3) for slot in range(view.workers))
    return found


class Policy:
    name = "regrows_with_the_agent"

    def reset(self, context):
        self.context, self.turn = context, 0

    def act(self, view):
        self.turn += 1
        if self.turn == 1:
            return list(view.frontier)[: view.workers]
        report = {"imported": IMPORTED, "source": SOURCE, "reproduced": _reproduced(view, self.context)}
        raise RuntimeError("FOUND=" + json.dumps(report))
