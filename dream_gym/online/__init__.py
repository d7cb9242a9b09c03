"""The online module: grows real worlds with a real discovery loop (tasks, agents, loop)."""
