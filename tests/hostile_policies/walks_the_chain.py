"""Hostile (to the parent's work, not to the rules): extends the deepest revealed leaf, forever.

Each decision is one legal selection that costs the policy almost nothing, so its own time
budget never runs out; on a world that is one long chain the episode would go on for as many
attempts as the chain has nodes. Only a bound on the attempts of an episode ends it."""


class Policy:
    def reset(self, context):
        pass

    def act(self, view):
        return list(view.frontier[-1:])  # ascending: the last is the newest leaf
