"""Run untrusted environment code (the designer's Gym modules) in a bubblewrap sandbox.

    from spade_cli.sandbox import SandboxConfig, EnvSession, EnvError, check_sandbox, run_pool
    with EnvSession(code, SandboxConfig(call_timeout=5)) as env:
        env.metadata                       # the Env class's metadata dict
        obs, info = env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step("action")
        env.renew(reload=False)            # a fresh instance in the same worker
    require_sandbox(unsafe)                # at command start: bwrap or exit 4 / loud warning
    run_pool(fn, items, max_workers)       # fn over items on threads, results in order

The options users set (`--unsafe-no-sandbox`, `--sandbox-package`, `--call-timeout`,
`--memory-mb`) are `settings.SandboxSettings`; `SandboxSettings.config()` is their
`SandboxConfig`.

One EnvSession is one persistent worker process (`worker.py`) in a jail of its own,
holding one environment instance, speaking JSON lines over its stdin/stdout: 40-65 µs
per reset/step round trip (1.0x the same worker without bwrap). As root (the usual case
on our machines and in containers), workers are forked from a fork server (`ForkServer`,
one per process and jail): one bwrap whose Python has imported numpy and gymnasium and
never runs untrusted code, forking each worker into fresh mount, pid, network, IPC and
UTS namespaces with fresh /proc, /tmp and /dev/shm, its own uid, limits and seccomp
filter: ~8 ms and ~8 MiB PSS per worker. Otherwise (not root, `SandboxConfig(fork=False)`,
`SPADE_SANDBOX_FORK=0`) each worker starts its own bwrap and Python: ~0.14 s of CPU and
~25 MiB PSS (`bench/bench_sandbox.py`). Failures raise
`EnvError(reason, detail)`; `reason` is one of `REASONS`. Exceptions raised by the
environment's own code (bad_reset, bad_step) leave the worker usable; everything else
(timeout, memory, limit, crash, flood, protocol) kills the worker and every process it
started, and the session answers that error from then on. Sessions are independent, so
a run of many of them (`run_pool`, `imap_pool`) goes on when some fail.

What the sandbox covers
-----------------------
- Namespaces: own pid namespace (nothing the environment starts outlives the worker:
  killing the sandbox's pid 1 kills them all, and `--die-with-parent` does that when the
  parent dies), no network (only its own loopback), own IPC, UTS and cgroup view.
- Identity: as root, bwrap runs without a user namespace and the worker switches to its
  own unprivileged host uid (one per live worker, so RLIMIT_NPROC, which the kernel
  ignores for uid 0, is a per-worker process limit); every capability is dropped
  (bounding set included) and no-new-privs is set (`jail.py`). A seccomp filter, compiled by
  libseccomp from one rule list for the host's architecture (x86_64, aarch64, ...:
  `seccomp.RULES`; any other ABI of the machine is killed), refuses new
  namespaces (a user namespace of its own would let the environment mount an unbounded
  tmpfs), setns, mount and the new mount API, ptrace, bpf, perf_event_open, userfaultfd,
  io_uring, keyrings, kernel modules, kexec, reboot, swap, process_vm_*, personality,
  modify_ldt, memfd_create, memfd_secret, SysV shared memory and message queues, file
  locks and leases (flock, fcntl record/OFD locks, F_GETLK), dnotify, inotify and
  fanotify, the page cache's residency (mincore, cachestat, RWF_NOWAIT reads), and every
  socket family but AF_UNIX, AF_INET, AF_INET6 and NETLINK_ROUTE. Where no filter can be
  built (no libseccomp.so.2), workers refuse to start unless the user accepts running
  without one (`SandboxConfig.allow_no_filter`, `--unsafe-no-seccomp`), and every record
  then says `seccomp: false`. As a non-root
  user, bwrap's user namespace maps the worker to uid 65534 and NPROC counts per
  namespace (tests cover both; the unprivileged one runs when the Python and the checkout
  are readable by uid 65534).
- File system: an empty root with, read-only: the shared libraries under /usr/lib, the
  interpreter and its stdlib at /opt/python (its own site-packages covered), and in
  /opt/site only gymnasium, its dependencies (numpy, cloudpickle, ...) and
  `SandboxConfig.packages`. No /etc (bar
  ld.so.cache), no /home, no /usr/bin, no host /tmp. Writable: a private tmpfs /tmp
  (`tmp_mb`) and /dev/shm (`shm_mb`); /dev otherwise read-only; /proc read-only (bwrap's
  /proc otherwise leaves the host's /proc/sys writable to root).
- Environment: bwrap itself starts with an empty environment (its own is readable
  inside as /proc/1/environ) and the worker gets only PATH, HOME, LANG and a few thread
  and Python settings.
- Limits: wall time per call and per episode (the parent kills the worker), CPU time
  (RLIMIT_CPU), address space (RLIMIT_AS, which also counts shared mmaps, unlike
  RLIMIT_DATA), processes + threads (RLIMIT_NPROC), file size, open files, no core dumps,
  the size of each reply line, and how much the environment may print per call. The
  parent drains the worker's stderr while it waits (an undrained pipe would deadlock)
  and keeps only its tail.
- Protocol: what the environment prints goes to that stderr sink, not to the protocol
  channel; the parent validates every reply (size, JSON, sequence number), so a worker
  that writes garbage or floods ends as `protocol`/`flood`, never hangs the parent.
- What the parent holds: counted as each reply is read (the decoded objects' size), at
  most `episode_mb` (32 MiB) from one reset() to the next and `session_mb` (128 MiB)
  over a worker's life; past either the session fails `flood`. A stage holds at most
  that per live session, however much its environments print.

- Memory: as root, where the kernel has a memory cgroup (`cgroup.py`), each worker and
  all it starts share one of memory_mb + tmp_mb + shm_mb: heap, children, tmpfs pages,
  pipes, kernel memory. What a cgroup could not count (SysV shm, memfds) is refused.
- Protocol: both ends bound replies (depth 64, 64-bit integers, valid Unicode, JSON
  types: `worker.protocol_problem`); nothing a worker sends raises anything but EnvError.
- Forked workers: the fork server holds CAP_SYS_ADMIN (to build their namespaces) but
  only ever runs trusted code; each worker drops to its own uid with no capabilities
  before the environment's module is read, and gets a private /dev/pts and inode-capped
  /tmp and /dev/shm. Workers alive together see no files, /proc entries, sockets
  (abstract or loopback), IPC, ptys or file locks of one another and cannot watch the
  files they share (tests/test_sandbox_channels.py), so episodes of one environment
  cannot tell each other apart or signal one another, bar through machine load. If the fork
  server dies, every worker forked from it dies too (their sessions answer `crash`), and
  the next session starts a new one.

What it does not cover
----------------------
- The kernel is shared: a kernel exploit escapes it. The seccomp filter is mostly a deny
  list: most system calls stay reachable, and the namespaces and the uid are what limit
  what they can touch.
- CPU and memory bandwidth are not shared fairly: a worker can use a whole core until its
  time limits fire. Contention is a covert channel between workers alive together that
  no namespace or filter closes: a sender that spins or idles by turns slows a receiver
  that times its own loop (a 12-bit token has crossed this way between two concurrent
  workers). So is the timing of reads of the files every jail shares (a page another
  worker read comes back faster), though the filter refuses the calls that read the
  cache's state.
- Without a memory cgroup (not root, cgroup=False), tmpfs pages are host memory outside
  RLIMIT_AS (bounded by their sizes: 128 workers x (tmp_mb + shm_mb) at worst) and each
  of up to nproc processes has its own memory_mb.
- The environment can read what the jail shows: the stdlib, the allowed packages, the
  shared libraries, its own code and the kernel's /proc view of the machine (CPU, memory
  size, kernel version, load) - no user data, but not nothing. /sys is not mounted.
- Results are only as honest as the environment: the sandbox stops it harming the host,
  not lying about rewards (that is spade-validate's job).
- Unsafe mode (`SandboxConfig(unsafe=True)`, the `--unsafe-no-sandbox` flag) runs the
  same worker as a plain subprocess of your user with the same rlimits, timeouts and
  seccomp filter and nothing else: no namespaces (it can read your files, use the network, signal your
  processes), and as root no process limit. It prints a loud warning; use it only for
  code you trust or inside a disposable VM/container.
"""

import importlib

# The session machinery is imported on first use, so importing `sandbox.settings` (every
# command that runs environments declares its options from it) stays cheap.
_EXPORTS = {
    "INSTALL_HINT": "config",
    "REASONS": "config",
    "EnvError": "config",
    "SandboxConfig": "config",
    "check_sandbox": "config",
    "require_sandbox": "config",
    "ForkServer": "forkserver",
    "EnvSession": "session",
    "imap_pool": "pools",
    "run_pool": "pools",
    "warn_unsafe": "notices",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value
