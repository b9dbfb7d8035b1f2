"""ForkServer: episode workers forked from one preloaded, sandboxed Python.

Starting a worker is a Python start plus importing numpy and gymnasium, ~0.1 s of CPU;
a rollout starts one per episode, and on a small machine that costs as much as the
episodes themselves. A ForkServer starts one bwrap sandbox whose Python (the zygote, in
worker.py) imports them once and never runs untrusted code; each EnvSession then gets
its worker forked from it (fork_server(cfg): one server per process and jail)
into fresh namespaces of its own (mount, pid, network, IPC, UTS; fresh /proc, /tmp and
/dev/shm), with its own host uid, limits and seccomp filter: what a worker of its own
bwrap gets, in milliseconds.

It needs root (the zygote builds those namespaces with CAP_SYS_ADMIN, which it holds
only while it runs trusted code) and pidfds (Linux 5.3); `ForkServer.usable(cfg)` says
whether it applies. Where it applies but the zygote cannot start (an unusual kernel),
`broken` says why once, and sessions start one bwrap per worker as they do elsewhere.
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import socket
import subprocess
import tempfile
import threading

from .config import (
    PY_FLAGS,
    PY_ROOT,
    WORKER_PATH,
    EnvError,
    SandboxConfig,
    bwrap_argv,
    check_sandbox,
)
from .keeper import spawn_from_keeper


def _host_pid(pidfd: int) -> int | None:
    """The pid, in our own pid namespace, of the process a pidfd refers to."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}") as f:
            for line in f:
                if line.startswith("Pid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


class Unavailable(Exception):
    """The zygote cannot start here: start workers the other way."""


class ForkedProcess:
    """The parent's view of one forked worker, shaped like the subprocess.Popen of a
    bwrap worker: pipes stdin/stdout/stderr, poll(), wait(), kill(), returncode.
    The process it follows is the worker's pid 1 (G in worker.py), which reports the
    worker's exit code on a status pipe and whose death takes its namespace along."""

    def __init__(self, pidfd: int, stdin: int, stdout: int, stderr: int, status: int):
        self.pidfd = pidfd
        self.pid = _host_pid(pidfd)
        self.stdin = open(stdin, "wb", buffering=0)  # noqa: SIM115 - closed by EnvSession
        self.stdout = open(stdout, "rb", buffering=0)  # noqa: SIM115
        self.stderr = open(stderr, "rb", buffering=0)  # noqa: SIM115
        self._status = status
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self._ended(0):
            self._reap()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._ended(None if timeout is None else max(0.0, timeout) * 1000):
                raise subprocess.TimeoutExpired("worker", timeout)
            self._reap()
        return self.returncode  # type: ignore[return-value]

    def _ended(self, ms: float | None) -> bool:
        """A pidfd polls readable once its process has exited (poll, not select: our
        descriptors pass select's limit of 1024 with 100+ workers)."""
        p = select.poll()
        p.register(self.pidfd, select.POLLIN)
        return bool(p.poll(ms))

    def kill(self) -> None:
        if self.returncode is None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _reap(self) -> None:
        """pid 1 has exited: the exit code it reported, or SIGKILL's if it reported none."""
        data = b""
        try:
            os.set_blocking(self._status, False)
            data = os.read(self._status, 64)
        except OSError:
            pass
        try:
            self.returncode = int(data.split(b"\n")[0])
        except ValueError:
            self.returncode = -signal.SIGKILL
        os.close(self._status)
        self._status = -1
        os.close(self.pidfd)
        self.pidfd = -1

    def __del__(self):
        for fd in (self.pidfd, self._status):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass


class ForkServer:
    """One zygote sandbox, started at the first fork and again if it ever dies; a
    context manager. `fork(settings)` may be called from many threads."""

    def __init__(self, cfg: SandboxConfig | None = None):
        self.cfg = cfg or SandboxConfig()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._log = None
        self.forks = 0
        self.broken: str | None = None  # why the zygote cannot start here

    @property
    def pid(self) -> int | None:
        """Host pid of the zygote's bwrap, while it runs."""
        return self._proc.pid if self._proc is not None else None

    @staticmethod
    def usable(cfg: SandboxConfig) -> bool:
        return not cfg.unsafe and os.geteuid() == 0 and hasattr(os, "pidfd_open")

    def fork(self, settings: dict, cgroup_fd: int | None = None) -> ForkedProcess:
        """A new worker running `run_worker(settings)` in namespaces of its own; with
        `cgroup_fd` (a cgroup.procs opened for writing) its pid 1 joins that cgroup first."""
        ends = [os.pipe() for _ in range(4)]  # stdin, protocol, stderr, status: (r, w)
        theirs = [ends[0][0], ends[1][1], ends[2][1], ends[3][1]]
        ours = [ends[0][1], ends[1][0], ends[2][0], ends[3][0]]
        try:
            with self._lock:
                reply, pidfd = self._request(
                    settings, theirs + ([cgroup_fd] if cgroup_fd is not None else [])
                )
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        if pidfd is None:
            for fd in ours:
                os.close(fd)
            raise EnvError(
                "crash",
                f"cannot start the worker: {reply.get('detail', 'the fork server refused')}",
            )
        self.forks += 1
        return ForkedProcess(pidfd, *ours)

    def start(self) -> bool:
        """Start the zygote now (else at the first fork), e.g. while a model loads;
        False where it cannot start here (see `broken`)."""
        with self._lock:
            try:
                self._ensure_running()
            except Unavailable:
                return False
        return True

    def _ensure_running(self) -> None:
        if self.broken:
            raise Unavailable(self.broken)
        if self._proc is None or self._proc.poll() is not None:
            try:
                self._start()
            except EnvError as e:
                if self.forks == 0:  # never worked here: never will
                    self.broken = e.detail
                    raise Unavailable(e.detail) from None
                raise

    def _request(self, settings: dict, fds: list[int]) -> tuple[dict, int | None]:
        for attempt in (0, 1):
            self._ensure_running()
            try:
                socket.send_fds(self._sock, [json.dumps(settings).encode()], fds)
                msg, pidfds, _flags, _addr = socket.recv_fds(self._sock, 1 << 16, 1)
                if not msg:
                    raise ConnectionResetError(
                        errno.ECONNRESET, "the fork server closed its socket"
                    )
            except OSError as e:  # died, or hung (socket timeout): start afresh, once
                detail = self._stop()
                if attempt:
                    raise EnvError("crash", f"the fork server failed: {e}{detail}") from None
                continue
            try:
                reply = json.loads(msg)
            except ValueError:
                reply = {"ok": False, "detail": "malformed reply from the fork server"}
            return reply, (pidfds[0] if pidfds and reply.get("ok") else None)
        raise AssertionError("unreachable")

    def _start(self) -> None:
        self._stop()
        cfg = self.cfg
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = bwrap_argv(check_sandbox(), 0, cfg, extra_caps=("CAP_SYS_ADMIN",))
        argv += [
            f"{PY_ROOT}/bin/python",
            *PY_FLAGS,
            WORKER_PATH,
            json.dumps({"zygote": {"fd": theirs.fileno()}, "limits": cfg.limits()}),
        ]
        self._log = tempfile.TemporaryFile()  # the zygote's own messages (trusted, few)
        try:  # from the keeper thread, where --die-with-parent holds
            self._proc = spawn_from_keeper(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                env={},
                cwd="/",
                close_fds=True,
                start_new_session=True,
                pass_fds=(theirs.fileno(),),
            )
        except OSError as e:
            ours.close()
            raise EnvError("crash", f"cannot start the fork server: {e}") from None
        finally:
            theirs.close()
        self._sock = ours
        ours.settimeout(cfg.start_timeout)
        try:
            ready = ours.recv(1024)
        except OSError:
            ready = b""
        if b'"ready"' not in ready:
            detail = self._stop()
            raise EnvError("crash", f"the fork server did not start{detail}")

    def _stop(self) -> str:
        """Kill the zygote (and every worker forked from it); its last words, if any."""
        detail = ""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            if self._proc.poll() is None:
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
            self._proc = None
        if self._log is not None:
            self._log.seek(0)
            tail = self._log.read()[-2000:].decode(errors="replace").strip().splitlines()[-2:]
            detail = (": " + " | ".join(tail)) if tail else ""
            self._log.close()
            self._log = None
        return detail

    def close(self) -> None:
        with self._lock:
            self._stop()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_servers: dict[tuple, ForkServer] = {}
_servers_lock = threading.Lock()


def fork_server(cfg: SandboxConfig) -> ForkServer | None:
    """The process's fork server for workers of `cfg`'s jail (one per set of packages
    and variables inside), or None where forking does not apply or cannot work here."""
    if not (cfg.fork and ForkServer.usable(cfg)) or os.environ.get("SPADE_SANDBOX_FORK") == "0":
        return None
    key = (os.getpid(), tuple(cfg.packages), tuple(sorted(cfg.extra_env.items())))
    with _servers_lock:
        server = _servers.get(key)
        if server is None:
            server = _servers[key] = ForkServer(cfg)
    return None if server.broken else server
