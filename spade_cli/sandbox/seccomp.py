"""The jail's seccomp filter: one declared rule list, compiled by libseccomp per architecture.

The parent (trusted) compiles `RULES` with the system's libseccomp (`libseccomp.so.2`,
through ctypes) into a classic-BPF program for the host's architecture and hands it to
each worker, which installs it (`jail.install_filter`) before it reads the environment's
module. libseccomp handles what a hand-written filter gets wrong: the architecture check
(any other ABI, x32 and i386 included, kills the process), the syscall numbers of each
architecture, and 64-bit argument comparisons (every comparison below masks the
argument, so that garbage in the upper half of an `int` cannot slip a value past).

What the rules refuse, and why. Above all new namespaces: in a user namespace of its own
the environment would be "root" there, could mount a tmpfs with no size limit (host
memory, outside RLIMIT_AS) and reach kernel code that needs capabilities. Then every
channel between workers that the namespaces leave: advisory locks and leases on the
files every jail shares read-only (the Python tree), inotify/fanotify/dnotify on them,
the page cache of those files (mincore, cachestat and RWF_NOWAIT reads tell a worker
which pages another worker just read), machine-wide counters (sysinfo), and memory the
limits cannot count (SysV shared memory and message queues, memfds). Sockets: an
allow-list of families (AF_UNIX, AF_INET, AF_INET6 in the worker's own network
namespace, and NETLINK_ROUTE, which glibc's getaddrinfo and if_nameindex use), so vsock
(not confined by a network namespace), other netlink protocols, packet and the rest are
refused. The rest is kernel attack surface an unprivileged process never needs.

    program = compile_filter("x86_64")   # bytes: struct sock_filter[]
    host_filter()                         # (program, None) or (None, why none here)
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import tempfile
from dataclasses import dataclass
from functools import lru_cache

ARCHES = ("x86_64", "aarch64")  # what `compile_filter` is tested for; libseccomp knows more

_CLONE_NEW = {
    "CLONE_NEWNS": 0x20000,
    "CLONE_NEWCGROUP": 0x2000000,
    "CLONE_NEWUTS": 0x4000000,
    "CLONE_NEWIPC": 0x8000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
    "CLONE_NEWTIME": 0x80,
}
# fcntl commands that lock, lease or watch: F_GETLK F_SETLK F_SETLKW F_OFD_GETLK
# F_OFD_SETLK F_OFD_SETLKW F_SETLEASE F_GETLEASE F_NOTIFY (F_GETLK reads others' locks).
_FCNTL_LOCKS = (5, 6, 7, 36, 37, 38, 1024, 1025, 1026)
_AF_ALLOWED = (1, 2, 10, 16)  # AF_UNIX AF_INET AF_INET6 AF_NETLINK (NETLINK_ROUTE only)
_AF_NETLINK, _NETLINK_ROUTE = 16, 0
_AF_LAST = 63  # the kernel refuses families >= AF_MAX (46 on Linux 6.x) itself
_NETLINK_LAST = 31  # and netlink protocols >= MAX_LINKS (32)
_RWF_NOWAIT = 0x8
_INT = 0xFFFFFFFF  # compare the low 32 bits: the kernel reads these arguments as int

_REFUSED = (
    # namespaces and mounts, the new mount API
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    # kernel attack surface: keyrings, tracing, BPF, modules, kexec, swap, io_uring, ...
    "keyctl",
    "add_key",
    "request_key",
    "ptrace",
    "perf_event_open",
    "bpf",
    "userfaultfd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "name_to_handle_at",
    "open_by_handle_at",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    "quotactl_fd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "process_vm_readv",
    "process_vm_writev",
    "personality",
    "modify_ldt",
    # watching the files every jail shares
    "inotify_init",
    "inotify_add_watch",
    "inotify_init1",
    "fanotify_init",
    "fanotify_mark",
    # memory no limit counts
    "memfd_secret",
    "memfd_create",
    "shmget",
    "msgget",
    # machine-wide counters and the shared page cache
    "sysinfo",
    "mincore",
    "cachestat",
)


@dataclass(frozen=True)
class Rule:
    """Refuse `syscall` with `errno` when every (argument, mask, value) of `when` holds:
    (args[argument] & mask) == value. Rules are alternatives; the default allows."""

    syscall: str
    errno: int
    when: tuple[tuple[int, int, int], ...] = ()


def _rules() -> tuple[Rule, ...]:
    rules = [Rule(name, errno.EPERM) for name in _REFUSED]
    for name in ("unshare", "clone"):  # the flags are the first argument of both
        rules += [Rule(name, errno.EPERM, ((0, bit, bit),)) for bit in _CLONE_NEW.values()]
    rules.append(Rule("clone3", errno.ENOSYS))  # flags behind a pointer; glibc falls back to clone
    rules += [Rule("fcntl", errno.ENOLCK, ((1, _INT, cmd),)) for cmd in _FCNTL_LOCKS]
    rules.append(Rule("flock", errno.ENOLCK))
    for name in ("socket", "socketpair"):
        rules += [
            Rule(name, errno.EAFNOSUPPORT, ((0, _INT, fam),))
            for fam in range(_AF_LAST + 1)
            if fam not in _AF_ALLOWED
        ]
        rules += [
            Rule(name, errno.EAFNOSUPPORT, ((0, _INT, _AF_NETLINK), (2, _INT, proto)))
            for proto in range(_NETLINK_LAST + 1)
            if proto != _NETLINK_ROUTE
        ]
    for name in ("preadv2", "pwritev2"):  # flags: the sixth argument
        rules.append(Rule(name, errno.EOPNOTSUPP, ((5, _RWF_NOWAIT, _RWF_NOWAIT),)))
    return tuple(rules)


RULES = _rules()


class NoFilter(Exception):
    """No filter can be built here: why, in words."""


class _Cmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


_ALLOW, _KILL_PROCESS = 0x7FFF0000, 0x80000000
_ERRNO = 0x00050000
_CMP_MASKED_EQ = 7
_ATTR_BADARCH = 2  # SCMP_FLTATR_ACT_BADARCH


@lru_cache(maxsize=1)
def _lib():
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError as e:
        raise NoFilter(
            f"libseccomp is not installed ({e}); Debian/Ubuntu: apt-get install "
            "libseccomp2, Fedora: dnf install libseccomp"
        ) from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_arch_resolve_name.restype = ctypes.c_uint32
    lib.seccomp_arch_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_arch_native.restype = ctypes.c_uint32
    for name in ("seccomp_arch_add", "seccomp_arch_remove"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_Cmp),
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def arch_token(arch: str) -> int:
    """libseccomp's token of `arch` (its AUDIT_ARCH_* value), or NoFilter."""
    token = _lib().seccomp_arch_resolve_name(arch.encode())
    if not token:
        raise NoFilter(f"libseccomp does not know the architecture {arch!r}")
    return token


def syscall_number(arch: str, name: str) -> int | None:
    """The number of `name` on `arch`, or None where that architecture has no such call."""
    nr = _lib().seccomp_syscall_resolve_name_arch(arch_token(arch), name.encode())
    return nr if nr >= 0 else None


def compile_filter(arch: str, rules: tuple[Rule, ...] = RULES) -> bytes:
    """`rules` as a classic-BPF program (struct sock_filter[]) for `arch`: any other
    architecture's calls kill the process; calls `arch` lacks are left out."""
    lib = _lib()
    token, native = arch_token(arch), lib.seccomp_arch_native()
    ctx = lib.seccomp_init(_ALLOW)
    if not ctx:
        raise NoFilter("seccomp_init failed")
    try:
        if token != native:  # a filter for this architecture only
            _ok(lib.seccomp_arch_add(ctx, token), f"adding {arch}")
            _ok(lib.seccomp_arch_remove(ctx, native), "removing the native architecture")
        _ok(lib.seccomp_attr_set(ctx, _ATTR_BADARCH, _KILL_PROCESS), "the bad-arch action")
        for rule in rules:
            if syscall_number(arch, rule.syscall) is None:
                continue
            # Rules take the native number of a call; libseccomp translates it by name.
            nr = lib.seccomp_syscall_resolve_name(rule.syscall.encode())
            cmps = (_Cmp * max(1, len(rule.when)))(
                *(_Cmp(arg, _CMP_MASKED_EQ, mask, value) for arg, mask, value in rule.when)
            )
            _ok(
                lib.seccomp_rule_add_array(ctx, _ERRNO | rule.errno, nr, len(rule.when), cmps),
                f"the rule {rule}",
            )
        with tempfile.TemporaryFile() as f:
            _ok(lib.seccomp_export_bpf(ctx, f.fileno()), "exporting the program")
            f.seek(0)
            return f.read()
    finally:
        lib.seccomp_release(ctx)


def _ok(rc: int, what: str) -> None:
    if rc != 0:
        raise NoFilter(f"libseccomp failed on {what}: {os.strerror(-rc)}")


@lru_cache(maxsize=1)
def host_filter() -> tuple[bytes | None, str | None]:
    """(this machine's program, None), or (None, why no filter can be built here)."""
    try:
        return compile_filter(platform.machine()), None
    except NoFilter as e:
        return None, str(e)
