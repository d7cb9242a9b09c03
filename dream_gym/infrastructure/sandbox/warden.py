"""The warden: runs one untrusted Python program in a sandbox that the kernel enforces.

The parent (:mod:`dream_gym.infrastructure.sandbox.launch`) starts this file by path, ``python -s -B warden.py
CONFIG``, with a fresh session. It imports only the standard library and ``pyseccomp``, so a
candidate's evaluation does not pay for importing dream_gym. With namespaces the processes are::

    parent (dream_gym, trusted)
      └─ warden      host PID namespace; watches the lifeline pipe, reports the payload's status
           └─ init   PID 1 of new user, PID, network, IPC and UTS namespaces; reaps, reports
                └─ payload   the policy template or a candidate's harness, confined
                     └─ episodes   (policy files) one fork of the template per episode

Without namespaces (the kernel refuses them) the warden starts the payload itself.

A script's working folder may be given a cap on its total size (:class:`Workspace`): with
namespaces the warden mounts a tmpfs of that size over it in the sandbox's own mount namespace
(the payload writes there; afterwards only the named outputs are copied back, regular files
within their size), without them it measures the folder while the payload runs.

Three things end every process of a sandbox with its parent, whatever the payload does: the
warden polls a *lifeline* pipe whose write end only the parent holds (EOF: the parent is gone)
and then kills init, whose death makes the kernel kill the whole PID namespace; the payload
cannot leave the process group the parent kills (``setsid``/``setpgid`` are refused); and the
payload's CPU time is capped by ``RLIMIT_CPU``.

:func:`confine` is what makes the payload harmless, in this order, each layer by the kernel:

* ``PR_SET_NO_NEW_PRIVS`` and every capability dropped (also the bounding and ambient sets);
* **Landlock** (any ABI): reads only below the read roots it is given (Python's runtime, the
  code of dream_gym, the program's own inputs), writes only below the write roots (a
  candidate's own working folder; a policy has none), no TCP (ABI 4+), no signals and no
  abstract Unix sockets to processes outside the sandbox (ABI 6+). ``/proc`` is not a read
  root: no process's environment, memory or command line can be read, including the parent's;
* **seccomp** (:func:`_load_seccomp`): no ``execve``, ``ptrace``, ``process_vm_*``, sockets,
  SysV IPC or POSIX message queues, namespace or mount changes, BPF, io_uring, keyrings,
  ``setsid``/``setpgid``, raising rlimits; and for untrusted code no new processes (threads
  only) and signals only to itself.

Where a layer is refused by the kernel, :func:`confine` raises :class:`SandboxRefused` and the
payload exits with :data:`EXIT_REFUSED` before any untrusted code runs, unless the parent asked
for the loudly named opt-out (``unsafe``), which runs the program with no confinement at all.
"""

from __future__ import annotations

import base64
import ctypes
import errno
import json
import os
import select
import signal
import stat
import struct
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

#: Exit code of a payload whose sandbox the kernel refused (the message is on stderr).
EXIT_REFUSED = 125
REFUSED_PREFIX = "dream_gym sandbox refused: "

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT = 38, 24, 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_CLONE_NEWIPC, _CLONE_NEWUTS, _CLONE_THREAD = 0x08000000, 0x04000000, 0x00010000
_CAPSET = {"x86_64": 126, "aarch64": 91}


class SandboxRefused(RuntimeError):
    """The kernel refused a layer of the sandbox; no untrusted code ran."""


def _errno_text() -> str:
    code = ctypes.get_errno()
    return f"{errno.errorcode.get(code, code)} ({os.strerror(code)})"


# -- Landlock -------------------------------------------------------------------------------
_LL_CREATE, _LL_ADD_RULE, _LL_RESTRICT = 444, 445, 446  # the same numbers on every architecture
_LL_VERSION_FLAG, _LL_RULE_PATH_BENEATH = 1, 1
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    version = _libc.syscall(_LL_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_LL_VERSION_FLAG))
    return max(0, int(version))


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: execute ... make_sym
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    if abi >= 5:
        rights |= _FS_IOCTL_DEV
    return rights


def _file_rights(abi: int) -> int:
    """The rights a rule on a regular file (not a folder) may hold."""
    return _fs_rights(abi) & (_FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV)


def _ruleset(abi: int, fs: int, net: int, scoped: int) -> int:
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    attr = _RulesetAttr(fs, net if abi >= 4 else 0, scoped if abi >= 6 else 0)
    fd = _libc.syscall(_LL_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise SandboxRefused(f"Landlock: creating a ruleset failed: {_errno_text()}")
    return int(fd)


def _add_path_rule(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a root that does not exist grants nothing
    try:
        rule = _PathBeneath(rights, fd)
        if _libc.syscall(_LL_ADD_RULE, ruleset, _LL_RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise SandboxRefused(f"Landlock: a rule for {path} was refused: {_errno_text()}")
    finally:
        os.close(fd)


def _restrict(ruleset: int) -> None:
    try:
        if _libc.syscall(_LL_RESTRICT, ruleset, 0) != 0:
            raise SandboxRefused(f"Landlock: restrict_self failed: {_errno_text()}")
    finally:
        os.close(ruleset)


def _landlock(abi: int, read: Mapping[str, Sequence[str]], write: Sequence[str]) -> None:
    """Reads below ``read`` (``{"tree": [...], "list": [...], "file": [...]}``), writes below
    ``write``, no TCP and no signals or abstract sockets out of the sandbox."""
    fs = _fs_rights(abi)
    ruleset = _ruleset(abi, fs, _NET_BIND_TCP | _NET_CONNECT_TCP, _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL)
    try:
        for path in read.get("list", ()):  # folder names only: a finder lists site-packages
            _add_path_rule(ruleset, path, _FS_READ_DIR)
        for path in read.get("tree", ()):
            rights = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
            _add_path_rule(ruleset, path, rights if os.path.isdir(path) else rights & _file_rights(abi))
        for path in read.get("file", ()):
            _add_path_rule(ruleset, path, _FS_READ_FILE & _file_rights(abi))
        for path in write:
            _add_path_rule(ruleset, path, fs if os.path.isdir(path) else _file_rights(abi))
    except BaseException:
        os.close(ruleset)
        raise
    _restrict(ruleset)


# -- seccomp --------------------------------------------------------------------------------
#: Refused (EPERM) for every confined process, trusted template included.
DENIED_SYSCALLS = (
    "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise",
    "setsid", "setpgid", "socket", "connect", "bind", "listen", "accept",
    "accept4", "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "move_mount",
    "open_tree", "fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "keyctl", "add_key", "request_key", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "reboot", "swapon", "swapoff", "acct", "syslog", "quotactl",
    "name_to_handle_at", "open_by_handle_at", "pidfd_getfd", "kcmp", "fanotify_init",
    "open_tree_attr", "statmount", "listmount", "quotactl_fd",
    "lookup_dcookie", "shmget", "shmat", "shmctl", "msgget", "msgsnd",
    "msgrcv", "msgctl", "semget", "semop", "semtimedop", "semctl", "mq_open", "mq_unlink",
    "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr", "personality", "vhangup",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
    "iopl", "ioperm", "uselib", "nfsservctl", "modify_ldt",
    # what reaches the host outside the sandbox's view: flushing every file system of the host,
    # and the host's uptime, load, process count and free memory and swap
    "sync", "syncfs", "sysinfo", "ustat", "process_mrelease",
)
#: Also refused for untrusted code (a policy episode, a candidate): new processes and signals
#: to anything but itself. ``clone3`` answers ENOSYS so that glibc falls back to ``clone``,
#: whose flags a filter can read (threads stay allowed).
DENIED_FOR_UNTRUSTED = ("fork", "vfork", "tkill", "pidfd_send_signal", "pidfd_open",
                        # the host's file systems (free space, which others' writes change), and
                        # watching files of the read roots that other processes open or read
                        "statfs", "fstatfs", "inotify_init", "inotify_init1", "capget",
                        # a path's attributes without opening it, outside Landlock's rules
                        "file_getattr", "file_setattr",
                        # what the page cache holds, read exactly or pushed out: a message for the
                        # next candidate in which files of the read roots are cached
                        "fadvise64", "readahead", "mincore", "cachestat",
                        # a file's mode, owner and times, which Landlock does not rule: a file the
                        # sandbox may only read would otherwise take a setuid bit, lose its execute
                        # bit, or carry a note in its times from one candidate to the next
                        "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
                        "utime", "utimes", "futimesat", "utimensat",
                        # memory that no address-space limit counts (a file's pages, not the mapping)
                        "memfd_create")
#: Extended attributes, refused to untrusted code as a file system without them refuses them
#: (ENOTSUP, which ``shutil.copy2`` and the like expect): Landlock does not rule them, so a file
#: the sandbox may only read (or only look up) would carry a note from one run to the next.
XATTR_CALLS = ("getxattr", "lgetxattr", "fgetxattr", "getxattrat", "listxattr", "llistxattr", "flistxattr",
               "listxattrat", "setxattr", "lsetxattr", "fsetxattr", "setxattrat", "removexattr",
               "lremovexattr", "fremovexattr", "removexattrat")
#: Numbers of the calls named here that a libseccomp older than the kernel may not know (from
#: 424 on, every architecture numbers a new call the same): such a name is refused by its number,
#: never skipped.
NEWER_SYSCALLS = {"cachestat": 451, "fchmodat2": 452, "map_shadow_stack": 453, "futex_wake": 454,
                  "futex_wait": 455, "futex_requeue": 456, "statmount": 457, "listmount": 458,
                  "lsm_get_self_attr": 459, "lsm_set_self_attr": 460, "lsm_list_modules": 461, "mseal": 462,
                  "setxattrat": 463, "getxattrat": 464, "listxattrat": 465, "removexattrat": 466,
                  "open_tree_attr": 467, "file_getattr": 468, "file_setattr": 469}
#: Untrusted code gets ENOSYS ("no such call") from every number above the newest one named
#: here, up to the first of the x32 range: a call a newer kernel adds cannot open a channel
#: before it is read and ruled on here.
UNKNOWN_SYSCALLS = range(max(NEWER_SYSCALLS.values()) + 1, 512)
#: Calls whose first argument names a process (0: the caller). Refused for untrusted code for
#: any other process: the answer (or ESRCH against EPERM) says which pids are alive.
_ABOUT_A_PID = ("getpgid", "getsid", "sched_getparam", "sched_getscheduler", "sched_getaffinity",
                "sched_rr_get_interval", "sched_getattr", "get_robust_list", "migrate_pages", "move_pages")
#: Calls whose second argument names a process (``which, who``).
_ABOUT_A_WHO = ("getpriority", "ioprio_get")
#: Also refused for a policy episode, which must leave nothing that a later episode can read in
#: the state the kernel shares between processes: every call that looks up a path (the dentry
#: cache keeps the names looked up, found or not, and a file read stays in the page cache, so a
#: later lookup or read is faster), that reads or changes what the page cache holds, or that
#: reads a descriptor's inode (inode numbers count up), or that grows or moves a mapping (growing
#: a library's mapping maps the rest of its file, which a first touch then reads into the page
#: cache; glibc's ``realloc`` copies instead when ``mremap`` fails). An episode's template imports
#: what the policy file imports ahead, so the episode needs no file.
DENIED_FOR_EPISODES = (
    "open", "openat", "openat2", "creat", "stat", "lstat", "fstat", "newfstatat", "fstatat64",
    "statx", "access", "faccessat", "faccessat2", "readlink", "readlinkat", "chdir", "fchdir",
    "statfs", "fstatfs", "truncate", "getdents", "getdents64", "mkdir", "mkdirat", "mknod", "mknodat", "rmdir", "unlink",
    "unlinkat", "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat",
    "inotify_add_watch", "fanotify_mark", "mremap", "remap_file_pages",  # (chmod and the like: every untrusted)
    # a socket pair's peer credentials hold the caller's pid; a timer aimed at a thread id says
    # whether a guessed id is the caller's
    "socketpair", "timer_create",
    # signals: an episode has no process to signal but itself, and the answer for another pid
    # (EPERM or ESRCH) says whether it is alive
    "kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
    # a new pipe: writing to one whose read end is closed raises SIGPIPE, whose siginfo holds
    # the caller's own pid (an episode holds only pipes whose other ends outlive it); and the
    # calls that read a signal's siginfo
    "pipe", "pipe2", "signalfd", "signalfd4", "rt_sigtimedwait",
)
#: Also refused for a policy episode: its own pid and thread id (an episode is forked from a
#: template that forks one after another, so the number would say how many came before it and
#: whether the template was restarted, which an earlier episode can cause); its calls answer 0.
#: Without a PID namespace its parent's and its group's ids would say the same; they answer 0 too.
HIDDEN_FROM_EPISODES = ("getpid", "gettid", "set_tid_address", "getppid", "getpgrp", "getpgid", "getsid")
#: ``fcntl`` commands that change an open file description (shared by every process that
#: inherited it) or announce this process to it, and the ``ioctl`` requests that do the same.
#: Every description an episode holds is its own, made for it; these are refused as well.
_FCNTL_SETS = {"F_SETFL": 4, "F_SETLK": 6, "F_SETLKW": 7, "F_SETOWN": 8, "F_SETSIG": 10,
               "F_SETOWN_EX": 15, "F_OFD_SETLK": 37, "F_OFD_SETLKW": 38, "F_SETLEASE": 1024,
               "F_NOTIFY": 1026, "F_SETPIPE_SZ": 1031, "F_ADD_SEALS": 1033}
#: The ``fcntl`` commands that take or ask for a record lock.
_FCNTL_LOCKS = (5, 6, 7, 36, 37, 38)  # F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW
_IOCTL_SETS = {"FIONBIO": 0x5421, "FIOASYNC": 0x5452, "FIOSETOWN": 0x8901, "SIOCSPGRP": 0x8902}
#: ``futex`` operations on a priority-inheriting lock, whose uncontended word the kernel sets
#: to the caller's thread id (``FUTEX_CMD_MASK`` leaves the private and clock flags out).
_FUTEX_PI_OPS = (6, 7, 8, 11, 12, 13)
_FUTEX_CMD_MASK = 0x7F
_MADV_COLD, _MADV_PAGEOUT = 20, 21  # they push a file's pages out of the page cache
#: A mapping filled whole by the kernel before the call returns: a stopped process's call runs on,
#: a core busy into the other episodes' turns, as long as the episode chooses.
_MAP_POPULATE, _MADV_POPULATE_READ, _MADV_POPULATE_WRITE = 0x8000, 22, 23
_PRIO_PROCESS, _IOPRIO_WHO_PROCESS = 0, 1
#: Executable memory of an episode's own: a red-team file ran machine code there (clflush, rdtsc)
#: and timed which lines of the libraries' shared code pages another episode of its grid had
#: loaded (Flush+Reload): the best node's place, passed between episodes through the CPU's cache.
#: Every library an episode can run is mapped by its template before it forks.
_PROT_EXEC = 0x4


_SIGNALLERS = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")  # the pid is their first argument


def _seccomp_filter(untrusted: bool, own_pid: int | None, episode: bool = False) -> Any:
    """The filter: :data:`DENIED_SYSCALLS`; for untrusted code also no new processes and no
    signal to a group, to every process or to pid 0; with ``own_pid``, to no pid but that one
    (without it, Landlock's signal scope keeps signals inside the sandbox's own domain). For a
    policy ``episode`` also :data:`DENIED_FOR_EPISODES`, no thread (each takes the next number
    of the pid counter, which a later episode's thread would show), no eviction from the page
    cache, no change to another process's scheduling (its template's: the episodes forked
    later inherit it), no mapping the kernel fills whole in one call (which runs on past the end
    of the episode's turn), no executable memory (:data:`_PROT_EXEC`), no change to an open file
    description, and no process id of its own or its family (:data:`HIDDEN_FROM_EPISODES` answer 0). For any untrusted code, no question about
    another process (:data:`_ABOUT_A_PID`)."""
    import pyseccomp as sc

    rules = sc.SyscallFilter(sc.ALLOW)
    eperm = sc.ERRNO(errno.EPERM)

    def deny(name: str | int, *args: Any, action: int = eperm) -> None:
        number = name if isinstance(name, int) else sc.resolve_syscall(sc.Arch.NATIVE, name)
        if number < 0:  # a name this libseccomp does not know
            number = NEWER_SYSCALLS.get(str(name), -1)
        if number < 0:
            return  # a call this architecture does not have (fstatat64 on x86_64)
        rules.add_rule(action, number, *args)  # any other failure stops the sandbox: never skipped

    for name in DENIED_SYSCALLS:
        deny(name)
    if untrusted:
        for name in DENIED_FOR_UNTRUSTED:
            deny(name)
        for name in XATTR_CALLS:
            deny(name, action=sc.ERRNO(errno.ENOTSUP))
        for advice in (_MADV_COLD, _MADV_PAGEOUT):
            deny("madvise", sc.Arg(2, sc.EQ, advice))
        # File locks, which two candidates of one round could pass a word through on a file both
        # may read: none, as on a file system without them (an episode's fcntl ones are below).
        deny("flock", action=sc.ERRNO(errno.ENOLCK))
        if not episode:
            for command in _FCNTL_LOCKS:
                deny("fcntl", sc.Arg(1, sc.EQ, command), action=sc.ERRNO(errno.ENOLCK))
        for number in UNKNOWN_SYSCALLS:
            deny(number, action=sc.ERRNO(errno.ENOSYS))
        deny("clone3", action=sc.ERRNO(errno.ENOSYS))
        deny("clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))  # a process, not a thread
        for name in _SIGNALLERS:
            deny(name, sc.Arg(0, sc.MASKED_EQ, 0xFFFFFFFF, 0))  # pid 0: its process group
            deny(name, sc.Arg(0, sc.MASKED_EQ, 0x80000000, 0x80000000))  # -1 (everyone) or -pgid
            if own_pid is not None:
                deny(name, sc.Arg(0, sc.NE, own_pid))
        for name in _ABOUT_A_PID:
            if not (episode and name in HIDDEN_FROM_EPISODES):  # those answer 0 whatever the pid
                deny(name, sc.Arg(0, sc.NE, 0))
        for name in _ABOUT_A_WHO:
            deny(name, sc.Arg(1, sc.NE, 0))
    if episode:
        for name in DENIED_FOR_EPISODES:
            deny(name)
        for name in HIDDEN_FROM_EPISODES:
            deny(name, action=sc.ERRNO(0))
        for command in _FCNTL_SETS.values():
            deny("fcntl", sc.Arg(1, sc.EQ, command))
        for request in _IOCTL_SETS.values():
            deny("ioctl", sc.Arg(1, sc.EQ, request))
        for operation in _FUTEX_PI_OPS:
            deny("futex", sc.Arg(1, sc.MASKED_EQ, _FUTEX_CMD_MASK, operation))
        deny("clone")  # threads too
        deny("setpriority", sc.Arg(0, sc.NE, _PRIO_PROCESS))
        deny("setpriority", sc.Arg(1, sc.NE, 0))
        deny("ioprio_set", sc.Arg(0, sc.NE, _IOPRIO_WHO_PROCESS))
        deny("ioprio_set", sc.Arg(1, sc.NE, 0))
        for name in ("sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr"):
            deny(name, sc.Arg(0, sc.NE, 0))
        # kernel work the turns cannot stop: a 64 MB mapping filled in one call lengthened every
        # other episode's rounds, which they counted (a page touched at a time stops at each fault)
        deny("mmap", sc.Arg(3, sc.MASKED_EQ, _MAP_POPULATE, _MAP_POPULATE))
        for advice in (_MADV_POPULATE_READ, _MADV_POPULATE_WRITE):
            deny("madvise", sc.Arg(2, sc.EQ, advice))
        for name in ("mmap", "mprotect", "pkey_mprotect"):  # no code of its own (:data:`_PROT_EXEC`)
            deny(name, sc.Arg(2, sc.MASKED_EQ, _PROT_EXEC, _PROT_EXEC))
    deny("prlimit64", sc.Arg(0, sc.NE, 0))  # another process's limits (its own: no capability to raise)
    return rules


def _load_seccomp(untrusted: bool, episode: bool = False) -> None:
    _seccomp_filter(untrusted, os.getpid() if untrusted else None, episode).load()


def _episode_program() -> bytes:
    """The compiled filter of a policy episode, naming no pid (Landlock scopes its signals)."""
    return _compiled(_seccomp_filter(True, None, episode=True))


def _compiled(rules: Any) -> bytes:
    """The filter as the kernel's BPF program (built once, loaded by every episode)."""
    fd = os.memfd_create("dream_gym-seccomp")
    try:
        with os.fdopen(os.dup(fd), "wb") as handle:
            rules.export_bpf(handle)
        return os.pread(fd, 1 << 20, 0)
    finally:
        os.close(fd)


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _fprog(program: bytes) -> tuple[Any, _SockFprog]:
    """A BPF program as the kernel takes it: its buffer (to keep alive) and the struct."""
    buffer = ctypes.create_string_buffer(program, len(program))
    return buffer, _SockFprog(len(program) // ctypes.sizeof(_SockFilter), ctypes.cast(buffer, ctypes.c_void_p))


def _load_fprog(address: int, what: str) -> None:
    if _libc.prctl(22, 2, address, 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise SandboxRefused(f"seccomp: loading {what} failed: {_errno_text()}")


def _load_compiled(program: bytes) -> None:
    buffer, prog = _fprog(program)
    _load_fprog(ctypes.addressof(prog), "a compiled filter")


class _EpisodeConfinement:
    """What an episode forked from a template applies to itself, with Landlock's signal scope
    (ABI 6+): a nested domain that only scopes signals and abstract sockets (the episode can no
    longer signal the template; the template, in the outer domain, can still end it), then the
    episodes' seccomp program. Its ctypes objects are built once, in the template: built anew in
    each just-forked episode, they copied about 55 more pages (0.3 ms) an episode."""

    def __init__(self, program: bytes):
        self.attr = _RulesetAttr(0, 0, _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL)
        self.attr_arguments = (ctypes.byref(self.attr), ctypes.c_size_t(ctypes.sizeof(_RulesetAttr)), ctypes.c_uint32(0))
        self.buffer, self.program = _fprog(program)
        self.program_address = ctypes.addressof(self.program)

    def apply(self) -> None:
        ruleset = _libc.syscall(_LL_CREATE, *self.attr_arguments)
        if ruleset < 0:
            raise SandboxRefused(f"Landlock: creating a ruleset failed: {_errno_text()}")
        _restrict(int(ruleset))
        _load_fprog(self.program_address, "the episode filter")


# -- the pages of mapped files --------------------------------------------------------------
class _DlPhdrInfo(ctypes.Structure):
    _fields_ = [("addr", ctypes.c_size_t), ("name", ctypes.c_char_p), ("phdr", ctypes.c_void_p),
                ("phnum", ctypes.c_uint16)]


class _Elf64Phdr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("offset", ctypes.c_uint64),
                ("vaddr", ctypes.c_uint64), ("paddr", ctypes.c_uint64), ("filesz", ctypes.c_uint64),
                ("memsz", ctypes.c_uint64), ("align", ctypes.c_uint64)]


_PT_LOAD, _MADV_WILLNEED = 1, 3


def file_mappings() -> list[tuple[int, int]]:
    """The address ranges of this process's mappings of files, from ``/proc/self/maps`` (read
    before Landlock: ``/proc`` is no read root); none where it cannot be read."""
    ranges = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[5].startswith("/"):
                    start, _, end = fields[0].partition("-")
                    ranges.append((int(start, 16), int(end, 16)))
    except OSError:
        return []
    return ranges


def load_mapped_pages(mapped: Sequence[tuple[int, int]] = ()) -> int:
    """Bring every page of every file this process has mapped into the page cache: the loaded
    segments of the interpreter, each shared library and extension module, and the ``mapped``
    ranges (:func:`file_mappings`, read before confinement: the locale and gconv files glibc
    maps at start). Returns how many bytes that covers. An episode forked from here reads no
    file, but the first touch of a mapped page still faults it in: a page no process had touched
    would be read from the disk (slow) and stay cached, which a later episode could time, one
    bit a page. With every page resident, every touch finds one. A 64-bit ELF process only (the
    layout read here)."""
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return 0
    ranges: list[tuple[int, int]] = list(mapped)  # unmapped since: madvise fails, nothing done
    page = os.sysconf("SC_PAGE_SIZE")

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_DlPhdrInfo), ctypes.c_size_t, ctypes.c_void_p)
    def visit(info: Any, size: int, data: Any) -> int:
        headers = ctypes.cast(info.contents.phdr, ctypes.POINTER(_Elf64Phdr))
        for i in range(info.contents.phnum):
            header = headers[i]
            if header.type == _PT_LOAD and header.filesz:
                start = info.contents.addr + header.vaddr
                ranges.append((start - start % page, start + header.filesz))
        return 0

    _libc.dl_iterate_phdr(visit, None)
    covered = 0
    for start, end in ranges:
        length = end - start
        if _libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(length), _MADV_POPULATE_READ) != 0:
            _libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(length), _MADV_WILLNEED)  # before Linux 5.14
        covered += length
    return covered


def compiled_filters() -> dict[str, str]:
    """The seccomp programs of a template (trusted, forks its episodes), of its episodes and of
    an untrusted script (a candidate), base64 text for the warden's config. The parent builds
    them once, so that a payload need not import pyseccomp: its search for libseccomp runs
    ``ldconfig -p`` twice through ``subprocess`` (about a fifth of a candidate's sandbox start),
    and in a template it imports ``threading``, whose at-fork handler every episode's fork would
    then run (about 80 more pages copied per episode). No program names a pid, so a payload uses
    them only where Landlock scopes signals (ABI 6+): a confined process cannot fork, so its
    Landlock domain holds it alone, and a signal leaves the domain for no process."""
    programs = {"template": _compiled(_seccomp_filter(False, None)), "episode": _episode_program(),
                "script": _compiled(_seccomp_filter(True, None))}
    return {name: base64.b64encode(program).decode("ascii") for name, program in programs.items()}


# -- capabilities and privileges ------------------------------------------------------------
class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _drop_privileges() -> None:
    """No new privileges ever; no capabilities (root in a user namespace, or root without one,
    keeps none: no CAP_SYS_RESOURCE to raise limits, no CAP_KILL, no CAP_DAC_OVERRIDE)."""
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SandboxRefused(f"no_new_privs failed: {_errno_text()}")
    for cap in range(64):
        _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last cap, EPERM without SETPCAP
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    number = _CAPSET.get(os.uname().machine)
    if number is None:
        return
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    if _libc.syscall(number, ctypes.byref(header), data) != 0:
        raise SandboxRefused(f"dropping capabilities failed: {_errno_text()}")


# -- confinement ----------------------------------------------------------------------------
#: What an episode's thread descriptor says its thread id is (see :func:`_thread_id_slot`).
EPISODE_THREAD_ID = 1


def _thread_id_slot() -> Any:
    """This thread's id as glibc keeps it in the thread's descriptor (``THREAD_SELF->tid``, at the
    offset libthread_db's ``_thread_db_pthread_tid`` gives), as a ctypes int there. The kernel
    writes a forked process's id into it, and an episode can read its own memory without a
    system call (numpy's ``__array_interface__`` reads any address): ``getpid`` answering 0 does
    not hide it. An episode sets it to :data:`EPISODE_THREAD_ID` before untrusted code runs (the
    thread's id is not read from it for the thread itself: ``raise`` asks the kernel). None
    without glibc's descriptor (the template then refuses to run episodes)."""
    import _thread  # not threading: its handler would run in every fork

    try:
        field = (ctypes.c_uint32 * 3).in_dll(_libc, "_thread_db_pthread_tid")
    except ValueError:
        return None
    bits, _, offset = field
    if bits != 32:
        return None
    return ctypes.c_int.from_address(_thread.get_ident() + offset)


class Confinement:
    """What the payload is allowed (built from the parent's config) and the calls that apply it.

    ``confine()`` applies the whole sandbox to this process; ``confine_episode()`` tightens a
    process forked from an already confined template (untrusted code runs next). Both return
    notes for the parent (the layers in force) and raise :class:`SandboxRefused`.
    """

    def __init__(self, spec: Mapping[str, Any], notes: Sequence[str]):
        self.read: Mapping[str, Sequence[str]] = spec.get("read", {})
        self.write: Sequence[str] = spec.get("write", ())
        self.unsafe = bool(spec.get("unsafe", False))
        self.notes = list(notes)
        self._filters = {name: base64.b64decode(text) for name, text in spec.get("filters", {}).items()}
        self._episode: _EpisodeConfinement | None = None  # a template's, with Landlock ABI 6+
        self._thread_id: Any = None  # a template's: its thread's id in its descriptor (_thread_id_slot)
        self._mapped: list[tuple[int, int]] = []  # a template's file mappings before Landlock

    def confine(self, untrusted: bool = True) -> list[str]:
        if self.unsafe:
            self.notes.append("UNSAFE: no sandbox (opted out)")
            return self.notes
        missing = []
        abi = landlock_abi()
        wanted = {"script"} if untrusted else {"template", "episode"}
        compiled = abi >= 6 and wanted <= self._filters.keys()
        if not compiled:
            try:  # before Landlock: finding libseccomp runs ldconfig
                import pyseccomp  # noqa: F401
            except (ImportError, OSError, RuntimeError) as exc:
                missing.append(f"seccomp filters cannot be built ({type(exc).__name__}: {exc})")
        if not untrusted:  # a template: what it maps now, for load_mapped_pages; where its thread id is
            self._mapped = file_mappings()
            self._thread_id = _thread_id_slot()
            if self._thread_id is None:
                missing.append("an episode's thread id cannot be hidden (no glibc thread descriptor)")
        _drop_privileges()
        if abi < 1:
            missing.append(f"Landlock is not available in this kernel ({_errno_text()})")
        else:
            _landlock(abi, self.read, self.write)
            self.notes.append(f"landlock-abi{abi}")
        if not missing:
            try:
                if compiled and untrusted:  # the parent's programs (compiled_filters)
                    _load_compiled(self._filters["script"])
                elif compiled:
                    self._episode = _EpisodeConfinement(self._filters["episode"])
                    _load_compiled(self._filters["template"])
                else:
                    if not untrusted and abi >= 6:  # a template: its episodes' filter, while it may still write
                        self._episode = _EpisodeConfinement(_episode_program())
                    _load_seccomp(untrusted)
                self.notes.append("seccomp")
            except (OSError, RuntimeError, ValueError) as exc:
                missing.append(f"seccomp is not available ({type(exc).__name__}: {exc})")
        if missing:
            raise SandboxRefused("; ".join(missing))
        return self.notes

    def load_mapped_pages(self) -> int:
        """See :func:`load_mapped_pages` (nothing without the sandbox)."""
        return 0 if self.unsafe else load_mapped_pages(self._mapped)

    def confine_episode(self) -> None:
        if self.unsafe:
            return
        self._thread_id.value = EPISODE_THREAD_ID  # the forked thread's is the template's slot
        if self._episode is not None:
            self._episode.apply()  # Landlock scopes signals: no pid in the filter
        else:  # no signal scope (Landlock ABI < 6): a filter that names this process's pid
            _load_seccomp(untrusted=True, episode=True)


# -- the workspace --------------------------------------------------------------------------
_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_WORKSPACE_POLL_S = 0.05  # without a mount: how often the warden measures the folder
WORKSPACE_REPORT_BYTES = 4000  # the warden's last word fits one atomic pipe write (PIPE_BUF is 4096)
_COPY_CHUNK = 1 << 20


class Workspace:
    """A script's working folder with a cap on its total size (``spec``: ``path``, ``size_mb``,
    ``inodes``, ``outputs``: a pattern of file names → the most bytes one may hold).

    Where the warden holds a user and a mount namespace, :meth:`prepare` mounts a tmpfs of
    ``size_mb`` and ``inodes`` over the folder for the sandbox alone, copies the folder's files
    in (the inputs the parent wrote), and the payload works there: a write past the cap fails
    with ENOSPC, and nothing the payload does reaches the real folder. After the payload has
    ended (every process of the sandbox is dead), :meth:`finish` copies back the named outputs
    that are regular files within their size (never following a link), and reports those it
    refused and whether the cap was reached. Without the namespaces (the kernel refused them,
    or the explicit opt-out) the payload works in the real folder and the warden measures it
    every :data:`_WORKSPACE_POLL_S` seconds, killing the payload once it is over the cap.
    """

    def __init__(self, spec: Mapping[str, Any]):
        self.path = str(spec["path"])
        self.size = int(spec["size_mb"]) << 20
        self.inodes = int(spec["inodes"])
        self.outputs: dict[str, int] = {str(k): int(v) for k, v in (spec.get("outputs") or {"*": self.size}).items()}
        # the real folder, opened before anything is mounted over it
        self.real = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self.mounted = -1  # the tmpfs's root
        self.over: str | None = None  # "size" or "files" once the cap was reached

    @property
    def fds(self) -> list[int]:
        return [fd for fd in (self.real, self.mounted) if fd >= 0]

    def prepare(self, mountable: bool) -> str:
        """Mount the tmpfs where this process holds a mount namespace of its own (a note saying
        which way the cap is kept)."""
        if not mountable:
            return "workspace polled (no mount namespace)"
        options = f"size={self.size},nr_inodes={self.inodes},mode=0700".encode()
        flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
        if _libc.mount(b"tmpfs", self.path.encode(), b"tmpfs", ctypes.c_ulong(flags), options) != 0:
            return f"workspace polled (tmpfs refused: {_errno_text()})"
        self.mounted = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        os.fchdir(self.mounted)  # the payload starts here (the old cwd is the folder below)
        for name in os.listdir(self.real):
            refused = _copy_file(self.real, name, self.mounted, self.size)
            if refused is not None and stat.S_ISREG(refused[0]):
                raise SandboxRefused(f"the files of the working folder do not fit its limit of {self.size >> 20} MB")
        return f"workspace tmpfs {self.size >> 20} MB"

    def over_cap(self) -> bool:
        """Without a mount: whether the folder holds more than the cap (bytes or files)."""
        used, files = _folder_usage(self.real, self.inodes)
        self.over = "files" if files > self.inodes else "size" if used > self.size else None
        return self.over is not None

    def finish(self, report_fd: int) -> None:
        """Copy the outputs back (with a tmpfs), then tell the parent what became of them."""
        refused: dict[str, list[int]] = {}
        if self.mounted < 0 and self.over is None:
            self.over_cap()  # past the cap since the last look (the payload ended meanwhile)
        if self.mounted >= 0:
            self._cap_reached()
            for name in sorted(os.listdir(self.mounted)):
                limit = self._limit_of(name)
                try:
                    problem = None if limit is None else _copy_file(self.mounted, name, self.real, limit)
                except OSError:
                    continue  # the real folder refused it (the parent sees no such file)
                if problem is not None and limit is not None:
                    refused[name] = [*problem, limit]
        _report(report_fd, {"over": self.over, "size_mb": self.size >> 20, "inodes": self.inodes,
                            "refused": refused})

    def _cap_reached(self) -> None:
        info = os.fstatvfs(self.mounted)
        if info.f_favail == 0:
            self.over = "files"
        elif info.f_bavail * info.f_frsize < max(1 << 16, self.size >> 6):  # less than 1/64 left
            self.over = "size"

    def _limit_of(self, name: str) -> int | None:
        import fnmatch

        limits = [limit for pattern, limit in self.outputs.items() if fnmatch.fnmatchcase(name, pattern)]
        return max(limits) if limits else None


def _copy_file(source: int, name: str, target: int, limit: int) -> list[int] | None:
    """Copy ``name`` from folder ``source`` to folder ``target`` when it is a regular file of
    at most ``limit`` bytes (a link is not followed, a FIFO not waited on); else return its
    ``[st_mode, st_size]``."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=source)
    except OSError:  # a link (ELOOP), a socket (ENXIO)
        info = os.stat(name, dir_fd=source, follow_symlinks=False)
        return [info.st_mode, info.st_size]
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return [info.st_mode, info.st_size]
        temporary = ".dream_gym-copy"
        out = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                      info.st_mode & 0o700 | 0o600, dir_fd=target)
        try:
            copied = 0
            while copied <= limit and (chunk := os.read(fd, min(_COPY_CHUNK, info.st_size + 1))):
                os.write(out, chunk)  # a full tmpfs raises ENOSPC: the inputs do not fit
                copied += len(chunk)
            if copied <= limit:
                os.rename(temporary, name, src_dir_fd=target, dst_dir_fd=target)
                return None
            return [info.st_mode, copied]
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                return [stat.S_IFREG, limit + 1]
            raise
        finally:
            os.close(out)
            try:
                os.unlink(temporary, dir_fd=target)  # left only when the copy failed
            except FileNotFoundError:
                pass
    finally:
        os.close(fd)


def _folder_usage(folder: int, most_files: int) -> tuple[int, int]:
    """(bytes allocated, entries) below the open ``folder``, links not followed; the walk stops
    once it has seen more than ``most_files`` entries."""
    used, files, pending = 0, 0, [os.dup(folder)]
    try:
        while pending and files <= most_files:
            current = pending.pop()
            try:
                with os.scandir(current) as entries:
                    for entry in entries:
                        files += 1
                        try:
                            info = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue  # removed meanwhile
                        used += info.st_blocks * 512
                        if stat.S_ISDIR(info.st_mode) and files <= most_files:
                            try:
                                pending.append(os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                                                       | os.O_CLOEXEC, dir_fd=current))
                            except OSError:
                                continue
            finally:
                os.close(current)
    finally:
        for fd in pending:
            os.close(fd)
    return used, files


def _report(fd: int, report: dict[str, Any]) -> None:
    """Write ``report`` as JSON on ``fd`` in one write of at most :data:`WORKSPACE_REPORT_BYTES` (refused
    names beyond that are left out), so that it never waits for the reader."""
    refused = report["refused"]
    for name in list(refused):
        if len(name) > 64:
            del refused[name]
    data = json.dumps(report).encode()
    while len(data) > WORKSPACE_REPORT_BYTES and refused:
        del refused[sorted(refused)[-1]]
        data = json.dumps(report).encode()
    try:
        os.write(fd, data)
    except OSError:
        pass  # the parent is gone


# -- processes ------------------------------------------------------------------------------
NAMESPACES_WITHOUT_MOUNT = "namespaces (no mount namespace)"


def _enter_namespaces() -> str:
    """New user, PID, network, IPC, UTS and mount namespaces for the processes forked next (a
    note saying which, or why none: the sandbox's other layers do not depend on them). The mount
    namespace is this process's at once: a workspace's tmpfs is mounted in it (:class:`Workspace`)
    and seen by the sandbox alone. A kernel that refuses the mount namespace alone still gives
    the others (:data:`NAMESPACES_WITHOUT_MOUNT`)."""
    uid, gid = os.getuid(), os.getgid()
    flags = _CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS
    mount = _libc.unshare(flags | _CLONE_NEWNS) == 0
    if not mount and _libc.unshare(flags) != 0:
        return f"no namespaces ({_errno_text()})"
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
    except OSError as exc:
        return f"namespaces without an id map ({exc.strerror})"
    return "namespaces" if mount else NAMESPACES_WITHOUT_MOUNT


def _close_fds(keep: Iterable[int]) -> None:
    """Close every descriptor above stderr except ``keep``."""
    low = 3
    for fd in sorted(k for k in set(keep) if k >= 3):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def _quiet_stdio() -> None:
    """Point this trusted process's stdio at /dev/null, so the parent's pipes reach EOF when
    the payload (the only writer left) ends."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _end_like(status: int) -> None:
    """End this process the way a child with wait ``status`` ended (signal or exit code)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if sig != signal.SIGKILL:  # SIGKILL has no handler to reset (signal() raises)
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _watch(child: int, lifeline: int, status_pipe: int | None, namespaced: bool,
           workspace: Workspace | None = None, done_fd: int | None = None) -> None:
    """Wait for ``child``; if the lifeline closes first (the parent died), kill everything. A
    workspace without a tmpfs is measured meanwhile, and the child killed once it is over its
    cap; after the child, the workspace's outputs are handed back and reported on ``done_fd``."""
    poller = select.poll()
    poller.register(lifeline, select.POLLIN | select.POLLHUP)
    pidfd = os.pidfd_open(child)
    poller.register(pidfd, select.POLLIN)
    polled = workspace is not None and workspace.mounted < 0
    while True:
        events = dict(poller.poll(int(_WORKSPACE_POLL_S * 1000) if polled else None))
        if pidfd in events:
            break
        if lifeline in events:
            os.kill(child, signal.SIGKILL)  # init's death ends its whole PID namespace
            if not namespaced:
                os.killpg(0, signal.SIGKILL)  # the payload cannot have left our group
            os.waitpid(child, 0)
            os._exit(128 + signal.SIGKILL)
        if polled and workspace is not None and workspace.over_cap():
            os.kill(child, signal.SIGKILL)  # init's death ends the rest; without it the payload is alone
            polled = False
    _, status = os.waitpid(child, 0)
    if status_pipe is not None:
        reported = os.read(status_pipe, 4)
        if len(reported) == 4:
            status = struct.unpack("i", reported)[0]
    if workspace is not None and done_fd is not None:
        try:
            workspace.finish(done_fd)
        except Exception:  # noqa: BLE001 - the payload's status is reported whatever happened here
            pass
    _end_like(status)


def _mount_own_proc() -> str:
    """Mount a proc file system of this PID namespace over ``/proc`` (in the sandbox's own mount
    namespace; called by its PID 1): the inherited one answers a lookup of any host pid, which
    Landlock does not rule (it rules opening), so an untrusted process could see which of the
    host's processes live. A note saying which ``/proc`` the sandbox sees."""
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if _libc.mount(b"proc", b"/proc", b"proc", ctypes.c_ulong(flags), None) != 0:
        return f"host /proc (a proc of its own refused: {_errno_text()})"
    return "proc of its own"


def _init(config: Mapping[str, Any], status_pipe: int, notes: list[str]) -> None:
    """PID 1 of the namespace: start the payload, reap every orphan, report the payload's status."""
    if "namespaces" in notes:  # a mount namespace of its own (not NAMESPACES_WITHOUT_MOUNT)
        notes.append(_mount_own_proc())
    payload = os.fork()
    if payload == 0:
        os.close(status_pipe)
        _payload(config, notes)
    _close_fds([status_pipe])
    _quiet_stdio()
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        if pid == payload:
            os.write(status_pipe, struct.pack("i", status))
            os._exit(0)


def _apply_limits(limits: Mapping[str, Any]) -> None:
    import resource

    def cap(which: int, value: int, hard: int | None = None) -> None:
        _, current = resource.getrlimit(which)
        top = value if hard is None else hard
        if current != resource.RLIM_INFINITY:
            value, top = min(value, current), min(top, current)
        resource.setrlimit(which, (value, top))

    cap(resource.RLIMIT_CORE, 0)
    if limits.get("memory_mb") is not None:
        cap(resource.RLIMIT_AS, int(limits["memory_mb"]) << 20)
    if limits.get("cpu_s") is not None:
        seconds = max(1, int(float(limits["cpu_s"]) + 0.999))
        cap(resource.RLIMIT_CPU, seconds, seconds + 1)  # SIGXCPU, then SIGKILL a second later
    if limits.get("fsize_mb") is not None:
        cap(resource.RLIMIT_FSIZE, int(limits["fsize_mb"]) << 20)


def _finish(code: int) -> None:
    """End the payload as the interpreter would: exit handlers, flushed streams, then exit."""
    import atexit

    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - a failing handler does not change the exit
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _confine_script(confinement: Confinement, report_fd: int | None) -> None:
    """Confine, then tell the parent on the report pipe (closed before the script runs, so
    the script cannot speak on it): ``{"ok": true, "notes": [...]}`` or the refusal."""
    try:
        reply: dict[str, Any] = {"ok": True, "notes": confinement.confine(untrusted=True)}
    except Exception as exc:  # noqa: BLE001 - whatever failed, nothing untrusted may run
        reply = {"ok": False, "error": str(exc) if isinstance(exc, SandboxRefused) else f"{type(exc).__name__}: {exc}"}
    if report_fd is not None:
        os.write(report_fd, json.dumps(reply).encode())
        os.close(report_fd)
    if not reply["ok"]:
        raise SandboxRefused(reply["error"])


def _print_exception(exc: BaseException) -> None:
    """The traceback as ``python script.py`` prints it: without the warden's and runpy's frames."""
    import traceback

    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, getattr(sys.modules.get("runpy"), "__file__", "")):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _defer_package(name: str) -> None:
    """Put package ``name`` into ``sys.modules`` without running its ``__init__`` (a call payload
    imports one submodule, not everything the package's ``__init__`` pulls in: a lighter process,
    faster to start and to fork). The ``__init__`` runs the first time a name it defines is asked
    for (``from package import name``), so code that uses the package sees all of it."""
    import importlib.util

    parent, _, short = name.rpartition(".")
    if name in sys.modules or (parent and parent not in sys.modules):
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def load_init(attr: str) -> Any:
        del module.__dict__["__getattr__"]  # once, and not again while the __init__ runs
        if importlib.util.find_spec(f"{name}.{attr}") is not None:  # a submodule: only that
            module.__dict__["__getattr__"] = load_init
            return importlib.import_module(f"{name}.{attr}")
        loader.exec_module(module)
        return getattr(module, attr)

    module.__dict__["__getattr__"] = load_init
    sys.modules[name] = module
    if parent:
        setattr(sys.modules[parent], short, module)


def _payload(config: Mapping[str, Any], notes: list[str]) -> None:
    """Run the payload (never returns): a script, confined before it starts, or a trusted
    function that confines itself after its own imports."""
    _close_fds(config.get("keep_fds", ()))
    _apply_limits(config.get("limits", {}))
    confinement = Confinement(config.get("confine", {}), notes)
    payload = config["payload"]
    code = 0
    try:
        if "script" in payload:
            import runpy

            _confine_script(confinement, config.get("report_fd"))
            sys.argv = [payload["script"], *payload.get("args", ())]
            runpy.run_path(payload["script"], run_name="__main__")
        else:
            import importlib

            for package in payload.get("defer", ()):
                _defer_package(package)
            module, _, name = payload["call"].partition(":")
            function: Callable[..., Any] = getattr(importlib.import_module(module), name)
            function(payload.get("args", []), confinement)
    except SandboxRefused as exc:
        sys.stderr.write(REFUSED_PREFIX + str(exc) + "\n")
        code = EXIT_REFUSED
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            sys.stderr.write(f"{exc.code}\n")
    except BaseException as exc:  # noqa: BLE001 - reported like an uncaught exception of `python script`
        _print_exception(exc)
        code = 1
    _finish(code)


def main(argv: Sequence[str]) -> None:
    config = json.loads(argv[0])
    lifeline = int(config["lifeline"])
    notes: list[str] = []
    namespaced = False
    try:  # the real folder is opened before any namespace or mount
        workspace = Workspace(config["workspace"]) if config.get("workspace") else None
        mountable = False
        if config.get("namespaces", True) and not config.get("confine", {}).get("unsafe"):
            note = _enter_namespaces()
            namespaced, mountable = note in ("namespaces", NAMESPACES_WITHOUT_MOUNT), note == "namespaces"
            notes.append(note)
        if workspace is not None:
            notes.append(workspace.prepare(mountable))
    except (OSError, SandboxRefused) as exc:
        _refuse(config.get("report_fd"), f"the workspace could not be prepared: {exc}")
    done_fd = config.get("done_fd")
    status_r, status_w = os.pipe() if namespaced else (None, None)
    child = os.fork()
    if child == 0:
        os.close(lifeline)
        if status_r is not None and status_w is not None:
            os.close(status_r)
            _init(config, status_w, notes)
        _payload(config, notes)
    if status_w is not None:
        os.close(status_w)
    kept = [lifeline, *([status_r] if status_r is not None else []), *([done_fd] if done_fd is not None else []),
            *(workspace.fds if workspace is not None else [])]
    _close_fds(kept)
    _quiet_stdio()
    _watch(child, lifeline, status_r, namespaced, workspace, done_fd)


def _refuse(report_fd: int | None, error: str) -> None:
    """Tell the parent that nothing runs (as :func:`_confine_script` does), and exit."""
    if report_fd is not None:
        os.write(report_fd, json.dumps({"ok": False, "error": error}).encode())
    sys.stderr.write(REFUSED_PREFIX + error + "\n")
    os._exit(EXIT_REFUSED)


if __name__ == "__main__":
    # Started by path: drop this folder from sys.path, so that nothing here shadows a module
    # the payload imports.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != here]
    main(sys.argv[1:])
