"""The sandbox for untrusted code: policy files and online candidates (see
docs/design/security.md).

* :mod:`~dream_gym.infrastructure.sandbox.warden`: the program that starts inside the sandbox and confines
  itself (namespaces, Landlock, seccomp, no capabilities), standard library only;
* :mod:`~dream_gym.infrastructure.sandbox.launch`: the parent's side (what may be read, starting the warden,
  the kernel probe and the explicit opt-out).

A sandbox's work folder comes from :mod:`dream_gym.infrastructure.work_folders`.
"""

from dream_gym.infrastructure.sandbox.launch import (
    UNSAFE_ENV,
    KernelSupport,
    Launched,
    SandboxUnavailable,
    kernel_support,
    launch,
    read_roots,
    require_sandbox,
    unsafe_requested,
)

__all__ = ["UNSAFE_ENV", "KernelSupport", "Launched", "SandboxUnavailable", "kernel_support", "launch",
           "read_roots", "require_sandbox", "unsafe_requested"]
