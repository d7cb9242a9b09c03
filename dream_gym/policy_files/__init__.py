"""Policies from anywhere; untrusted policy files run isolated (docs/guides/policy-files.md).

``load_policy(spec)`` is the front door: a built-in name, ``module:attr``, a ``.py`` file (run
isolated by default) or a trained SB3 model ``.zip``. One concept a module:

* :mod:`~dream_gym.policy_files.specs`: what a spec names, and the policy it loads;
* :mod:`~dream_gym.policy_files.inprocess`: building a policy in this process (the parent's
  trusted specs, the child's file);
* :mod:`~dream_gym.policy_files.isolated`: :class:`IsolatedPolicy`, the parent side of a policy
  that runs in a child process with time, memory and output limits;
* :mod:`~dream_gym.policy_files.channels`: the parent's ends of an episode's pipes, and releasing
  a launched template;
* :mod:`~dream_gym.policy_files.output`: what the child's processes print, drained with bounded
  tails;
* :mod:`~dream_gym.policy_files.child`: the template and its episode processes;
* :mod:`~dream_gym.policy_files.wire`: the message protocol between them (framing, views, batches);
* :mod:`~dream_gym.policy_files.hardening`: the episodes' audit hook;
* :mod:`~dream_gym.policy_files.errors`: the errors of loading and of isolated runs.
"""

from dream_gym.policy_files.errors import (
    PolicyCrashed,
    PolicyError,
    PolicyException,
    PolicyLoadError,
    PolicyMemoryError,
    PolicyNotFoundError,
    PolicyOutputError,
    PolicyProtocolError,
    PolicyTimeout,
)
from dream_gym.policy_files.isolated import IsolatedPolicy
from dream_gym.policy_files.specs import (
    check_policy_spec,
    load_policy,
    load_policy_file,
    policy_from_namespace,
    probe_policy_files,
)

__all__ = [
    "IsolatedPolicy", "PolicyCrashed", "PolicyError", "PolicyException", "PolicyLoadError",
    "PolicyMemoryError", "PolicyNotFoundError", "PolicyOutputError", "PolicyProtocolError",
    "PolicyTimeout", "check_policy_spec", "load_policy", "load_policy_file",
    "policy_from_namespace", "probe_policy_files",
]
