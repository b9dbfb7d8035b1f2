"""The jail's hardening, applied by each worker to itself before untrusted code runs:
the privilege drop, the seccomp filter, the resource limits.

Runs inside the sandbox beside worker.py (which loads it by path: the spade_cli package
is not visible there) and imports nothing of ours. The filter program comes from the
parent, compiled by libseccomp from `seccomp.RULES` (trusted code, outside the jail).
"""

import ctypes
import errno
import os
import resource
import signal

_PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP = 24, 38, 22
_SECCOMP_MODE_FILTER = 2


def drop_privileges(uid):
    """Become `uid` on the host: RLIMIT_NPROC is not enforced for uid 0, and root
    without capabilities can still write root-owned files such as /proc/sys."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):  # empty the bounding set while CAP_SETPCAP is still held
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # clears permitted/effective/ambient capabilities

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    data = (Data * 2)()  # all zero: drop the inheritable set too
    if libc.capset(ctypes.byref(Header(0x20080522, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if os.getuid() != uid or os.geteuid() != uid:
        raise SystemExit("could not drop privileges")


def install_filter(program):
    """Install a classic-BPF seccomp program (bytes of struct sock_filter[]) on this
    process and every process it starts; it can never be removed."""

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # required for an unprivileged filter
    fprog = Fprog(len(program) // 8, program)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "installing the seccomp filter failed")


def set_limits(lim):
    mb = 1024 * 1024
    pairs = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_FSIZE, lim["file_mb"] * mb),
        (resource.RLIMIT_NOFILE, lim["open_files"]),
        (resource.RLIMIT_MEMLOCK, 0),
    ]
    if lim.get("nproc"):
        pairs.append((resource.RLIMIT_NPROC, lim["nproc"]))
    for res, value in pairs:
        resource.setrlimit(res, (value, value))
    # CPU: SIGXCPU at the soft limit (reported as a timeout), SIGKILL a second later.
    resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu_seconds"], lim["cpu_seconds"] + 1))
    # A file growing past RLIMIT_FSIZE should fail the write (EFBIG), not kill the worker.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def set_memory_limit(lim):
    # RLIMIT_AS, not RLIMIT_DATA: DATA does not count shared mappings (mmap bombs).
    value = lim["memory_mb"] * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (value, value))
