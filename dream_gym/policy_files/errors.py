"""What can go wrong with a policy: the errors of loading a spec and of an isolated run.

Loading raises :class:`PolicyNotFoundError` (a LookupError: unknown name, missing module or
file) or :class:`PolicyLoadError` (a ValueError: the file defines no policy, or importing it
failed). An isolated policy's failures during an episode are :class:`PolicyError` subclasses;
``run_episode(..., on_error="record")`` records them in ``EpisodeResult.error``.
"""

from __future__ import annotations


class PolicyError(RuntimeError):
    """An isolated policy failed; the message names the policy and the problem."""


class PolicyTimeout(PolicyError):
    """A decision took longer than ``decision_timeout_s``, or the episode's policy-time budget
    (``episode_timeout_s``) or the CPU limit ran out. The process group was killed."""


class PolicyCrashed(PolicyError):
    """The policy process died. ``exit_code``/``signal`` say how, ``stderr_tail`` what it printed."""

    def __init__(self, message: str, exit_code: int | None = None, signal_name: str | None = None,
                 stderr_tail: str = ""):
        super().__init__(message)
        self.exit_code = exit_code
        self.signal = signal_name
        self.stderr_tail = stderr_tail


class PolicyMemoryError(PolicyError):
    """The policy ran out of its memory limit (``memory_mb``)."""


class PolicyProtocolError(PolicyError):
    """The policy returned something that is not a batch (None, a string, garbage), or its
    process broke the message protocol."""


class PolicyException(PolicyError):
    """The policy's own code raised; the message has the exception and where it was raised."""


class PolicyOutputError(PolicyError):
    """The policy printed more than ``max_output_bytes`` in one episode."""


class PolicyNotFoundError(LookupError):
    """No built-in policy, module attribute or file of that name."""


class PolicyLoadError(ValueError):
    """The file or module exists but defines no policy, or importing it failed."""


__all__ = [
    "PolicyCrashed", "PolicyError", "PolicyException", "PolicyLoadError", "PolicyMemoryError",
    "PolicyNotFoundError", "PolicyOutputError", "PolicyProtocolError", "PolicyTimeout",
]
