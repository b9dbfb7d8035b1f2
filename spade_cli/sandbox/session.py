"""EnvSession: the parent's handle on one sandboxed environment worker."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import os
import resource
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson

from ..errors import ResourceError
from .cgroup import WorkerCgroup, join_in_child, remove_later
from .config import (
    PY_FLAGS,
    PY_ROOT,
    REASONS,
    WORKER_PATH,
    EnvError,
    SandboxConfig,
    bwrap_argv,
    check_sandbox,
    jail_env,
)
from .forkserver import ForkedProcess, Unavailable, fork_server
from .keeper import spawn_from_keeper
from .notices import warn_once, warn_unsafe
from .seccomp import host_filter
from .uids import uids
from .worker import MAX_DEPTH, protocol_scan

_TAIL = 4096  # bytes of the worker's stderr kept for error details

_fd_limit_raised = False


@functools.lru_cache(maxsize=1)
def _hex(program: bytes) -> str:
    return program.hex()


def _wait_fd(fd: int, event: int, timeout: float) -> bool:
    """poll, not select: with 100+ sessions our descriptors pass select's 1024 limit."""
    p = select.poll()
    p.register(fd, event)
    return bool(p.poll(max(0.0, timeout) * 1000))


def _raise_fd_limit() -> None:
    """Each session holds 4 descriptors here; 128 of them pass the usual soft limit of
    1024 once the rest of the program has its share. Raise it to the hard limit."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else 1 << 16
        if soft != resource.RLIM_INFINITY and soft < min(want, 1 << 16):
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, 1 << 16), hard))
    except (ValueError, OSError):
        pass


class EnvSession:
    """One untrusted environment module, loaded into one persistent sandboxed worker.

    `reset`/`step` block on the worker's pipes (many sessions run concurrently from
    threads). Any failure raises EnvError; after a fatal one (timeout, memory, limit,
    crash, flood, protocol) the worker is gone and every later call raises the same
    error. Exceptions raised by the environment's own code (bad_reset, bad_step) leave
    the worker alive. A session may be used from any thread, one call at a time.

    Where the fork server applies (`fork_server(cfg)`), the worker is forked from a shared,
    preloaded, sandboxed Python into namespaces of its own instead of starting a bwrap
    and a Python of its own: the same jail and limits, started in milliseconds.
    """

    def __init__(self, code: str, cfg: SandboxConfig | None = None):
        self.cfg = cfg or SandboxConfig()
        self.code = code
        self.forks = fork_server(self.cfg)
        self.uid: int | None = None  # host uid of the worker (root mode); kept after close
        self._uid_held = False
        self.proc: subprocess.Popen | ForkedProcess | None = None
        self.dead: EnvError | None = None
        self.metadata: dict = {}
        self.class_name: str = ""
        self.calls = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._buf = bytearray()
        self._tail = bytearray()
        self._printed = 0
        self.held = 0  # decoded bytes of every reply so far (bounded by session_mb)
        self._episode_held = 0  # of the replies since the last reset (episode_mb)
        self._pidfd: int | None = None
        self.sandbox_pid: int | None = None  # host pid of the sandbox's pid 1 (not unsafe mode)
        self._episode_end: float | None = None
        self.filtered = True  # the worker runs under the seccomp filter
        self.cgroup: WorkerCgroup | None = None  # the worker's memory cgroup, where there is one
        t0 = time.monotonic()
        try:
            self._spawn()
            ready = self._recv(-1, time.monotonic() + self.cfg.start_timeout, "starting the worker")
            if ready != "ready":
                self._fail("protocol", "the worker did not say ready")
            hello = self._request({"code": code}, 0, self.cfg.call_timeout, "loading the module")
        except BaseException:
            self.close()
            raise
        self.start_seconds = time.monotonic() - t0
        self._describe(hello)

    # -- public API -------------------------------------------------------------

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        with self._lock:
            self._episode_end = time.monotonic() + self.cfg.episode_timeout
            self._episode_held = 0
            out = self._call({"op": "reset", "seed": seed, "options": options}, "reset()")
        if not (isinstance(out, list) and len(out) == 2):
            self._fail("protocol", "malformed reset reply")
        return out[0], out[1]

    def step(self, action) -> tuple[str, float, bool, bool, dict]:
        with self._lock:
            out = self._call({"op": "step", "action": action}, "step()")
        if not (isinstance(out, list) and len(out) == 5):
            self._fail("protocol", "malformed step reply")
        return tuple(out)  # type: ignore[return-value]

    def renew(self, reload: bool = False) -> dict:
        """A fresh instance of the environment class in the same worker (for determinism
        checks); with reload=True the module is executed again first, so module-level
        state starts over too."""
        with self._lock:
            self._episode_end = None
            out = self._call({"op": "new", "reload": reload}, "re-instantiating")
        self._describe(out)
        return self.metadata

    def twin(self) -> EnvSession:
        """A fresh worker for the same module, of another identity: its own uid slot (this
        worker's is still held), the other start mode (a bwrap and Python of its own where
        this worker was forked, so another address layout and process history; forked
        where this one was not and forking applies). Same seed, same episode holds in
        every worker: the validator compares the two."""
        forked = isinstance(self.proc, ForkedProcess)
        return EnvSession(self.code, dataclasses.replace(self.cfg, fork=not forked))

    @property
    def alive(self) -> bool:
        return self.dead is None and self.proc is not None and self.proc.poll() is None

    @property
    def stderr_tail(self) -> str:
        return self._tail.decode(errors="replace")

    def close(self) -> None:
        """Stop the worker and everything it started (all killed when this returns)."""
        proc = self.proc
        if proc is None:
            self._release_uid()
            return
        if proc.poll() is None:
            try:
                proc.stdin.close()  # the worker exits on EOF ...
                proc.wait(timeout=0.5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()
        for f in (proc.stdin, proc.stdout, proc.stderr):
            try:
                f.close()
            except OSError:
                pass
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        self._release_uid()
        if self.cgroup is not None:
            remove_later(self.cgroup)
            self.cgroup = None
        if self.dead is None:
            self.dead = EnvError("crash", "the session is closed")
        self.proc = None

    def _new_cgroup(self) -> int | None:
        """A memory cgroup for the worker about to start; the descriptor it joins through."""
        if not self.cfg.cgroup:
            return None
        self.cgroup = WorkerCgroup.create(self.cfg.cgroup_mb)
        return self.cgroup.join_fd() if self.cgroup is not None else None

    def _release_uid(self) -> None:
        if self._uid_held:
            uids.release(self.uid)
            self._uid_held = False

    def __enter__(self) -> EnvSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- internals --------------------------------------------------------------

    def _spawn(self) -> None:
        global _fd_limit_raised
        if not _fd_limit_raised:
            _fd_limit_raised = True
            _raise_fd_limit()
        cfg = self.cfg
        self._filter = self._filter_hex()
        if self.forks is not None:
            check_sandbox()  # bwrap still here: the same answer whichever way workers start
            try:
                self._fork()
                return
            except Unavailable as e:
                warn_once(
                    f"spade: sandboxed workers cannot be forked here ({e}); starting "
                    "one bwrap per worker instead (slower)"
                )
                self._release_uid()
        info_r = info_w = None
        if cfg.unsafe:
            warn_unsafe()
            argv = [sys.executable, *PY_FLAGS, str(Path(__file__).with_name("worker.py"))]
            env = jail_env(cfg, None)
            settings = {"uid": None, "limits": cfg.limits(), "seccomp": self._filter}
        else:
            bwrap = check_sandbox()
            if os.geteuid() == 0:
                self.uid = uids.acquire()
                self._uid_held = True
            info_r, info_w = os.pipe()
            argv = bwrap_argv(bwrap, self.uid, cfg)
            argv[1:1] = ["--info-fd", str(info_w)]
            argv += [f"{PY_ROOT}/bin/python", *PY_FLAGS, WORKER_PATH]
            # bwrap's own environment is readable inside as /proc/1/environ: give it none.
            env = {}
            settings = {"uid": self.uid, "limits": cfg.limits(), "seccomp": self._filter}
        argv.append(json.dumps(settings))
        cg_fd = self._new_cgroup()
        try:
            self.proc = spawn_from_keeper(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd="/",
                close_fds=True,
                start_new_session=True,
                pass_fds=(info_w,) if info_w is not None else (),
                preexec_fn=join_in_child(cg_fd) if cg_fd is not None else None,
            )
        except (OSError, subprocess.SubprocessError) as e:
            if info_r is not None:
                os.close(info_r)
            raise EnvError("crash", f"cannot start the worker: {e}") from None
        finally:
            if info_w is not None:
                os.close(info_w)
            if cg_fd is not None:
                os.close(cg_fd)
        self._watch_pipes()
        if info_r is not None:
            self._read_info(info_r)

    def _filter_hex(self) -> str | None:
        """The seccomp program for the worker, or None where the user accepted running
        without one; without either, the sandbox refuses to start (ResourceError)."""
        program, why = host_filter()
        if program is not None:
            return _hex(program)
        if not self.cfg.allow_no_filter:
            raise ResourceError(
                f"no seccomp filter can be installed here: {why}; or pass "
                "--unsafe-no-seccomp to run workers without one"
            )
        warn_once(
            f"spade: warning: workers run WITHOUT a seccomp filter ({why}); every "
            "record says seccomp: false"
        )
        self.filtered = False
        return None

    def _watch_pipes(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            os.set_blocking(f.fileno(), False)
        self._poll = select.poll()
        self._poll.register(self.proc.stdout.fileno(), select.POLLIN)
        self._poll.register(self.proc.stderr.fileno(), select.POLLIN)

    def _fork(self) -> None:
        if os.geteuid() == 0:
            self.uid = uids.acquire()
            self._uid_held = True
        cfg = self.cfg
        cg_fd = self._new_cgroup()
        try:
            self.proc = self.forks.fork(
                {
                    "uid": self.uid,
                    "limits": cfg.limits(),
                    "seccomp": self._filter,
                    "tmp_mb": cfg.tmp_mb,
                    "shm_mb": cfg.shm_mb,
                },
                cg_fd,
            )
        except Unavailable:
            if self.cgroup is not None:  # the bwrap path makes its own
                self.cgroup.remove()
                self.cgroup = None
            raise
        finally:
            if cg_fd is not None:
                os.close(cg_fd)
        self.sandbox_pid = self.proc.pid
        self._watch_pipes()

    def _read_info(self, fd: int) -> None:
        """bwrap reports the host pid of the sandbox's pid 1; a pidfd on it lets us kill
        the whole pid namespace synchronously and without a pid-reuse race."""
        data = b""
        deadline = time.monotonic() + self.cfg.start_timeout
        try:
            while time.monotonic() < deadline:
                if not _wait_fd(fd, select.POLLIN, deadline - time.monotonic()):
                    break
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                data += chunk
                try:
                    pid = json.loads(data)["child-pid"]
                    self._pidfd = os.pidfd_open(pid)
                    self.sandbox_pid = pid
                    return
                except (ValueError, KeyError):
                    continue
                except OSError:
                    return
        finally:
            os.close(fd)

    def _describe(self, result) -> None:
        if not isinstance(result, dict):
            self._fail("protocol", "malformed description")
        self.class_name = str(result.get("class", ""))
        meta = result.get("metadata")
        self.metadata = meta if isinstance(meta, dict) else {}

    def _call(self, req: dict, what: str):
        if self.dead is not None:
            raise self.dead
        rid = next(self._ids)
        now = time.monotonic()
        limit = self.cfg.call_timeout
        if self._episode_end is not None and self._episode_end - now < limit:
            limit = max(0.0, self._episode_end - now)
            what += f" (episode limit {self.cfg.episode_timeout:g}s)"
        self.calls += 1
        return self._request({**req, "id": rid}, rid, limit, what)

    def _request(self, req: dict, rid: int, limit: float, what: str):
        deadline = time.monotonic() + limit
        what = f"{what} [limit {limit:.3g}s]"
        self._printed = 0
        self._send(orjson.dumps(req) + b"\n", deadline, what)
        return self._recv(rid, deadline, what)

    def _send(self, data: bytes, deadline: float, what: str) -> None:
        fd = self.proc.stdin.fileno()
        view = memoryview(data)
        while view:
            try:
                n = os.write(fd, view)
                view = view[n:]
                continue
            except BlockingIOError:
                pass
            except BrokenPipeError:
                self._died(what)
            left = deadline - time.monotonic()
            if left <= 0:
                self._fail("timeout", f"{what}: the worker stopped reading its input")
            _wait_fd(fd, select.POLLOUT, left)

    def _recv(self, rid: int, deadline: float, what: str):
        out_fd, err_fd = self.proc.stdout.fileno(), self.proc.stderr.fileno()
        cap = self.cfg.reply_bytes + 4096
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                return self._parse(line, rid, what)
            if len(self._buf) > cap:
                self._fail("flood", f"{what}: reply longer than {self.cfg.reply_bytes} bytes")
            left = deadline - time.monotonic()
            if left <= 0:
                self._fail("timeout", f"{what}: no answer in time")
            for fd, _ev in self._poll.poll(left * 1000):
                try:
                    data = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                if fd == out_fd:
                    if not data:
                        self._died(what)
                    self._buf += data
                elif fd == err_fd:
                    if not data:
                        self._poll.unregister(err_fd)
                        continue
                    self._printed += len(data)
                    self._tail += data
                    del self._tail[:-_TAIL]
                    if self._printed > self.cfg.output_bytes:
                        self._fail(
                            "flood", f"{what}: printed more than {self.cfg.output_bytes} bytes"
                        )

    def _parse(self, line: bytes, rid: int, what: str):
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            try:  # NaN/Infinity (a reward of nan is the validator's to judge, not ours)
                msg = json.loads(line)
            except (ValueError, RecursionError):
                self._fail(
                    "protocol",
                    f"{what}: the worker wrote something that is not JSON "
                    "(or nested too deep to read)",
                )
        if not isinstance(msg, dict) or msg.get("id") != rid:
            self._fail("protocol", f"{what}: reply out of sequence")
        # The worker bounds what it sends, but the environment shares its process and may
        # write to the channel itself: check again here.
        problem, size = protocol_scan(msg, MAX_DEPTH + 1)  # the result sits one level down
        if problem is not None:
            self._fail("protocol", f"{what}: the reply holds {problem}"[:2000])
        self._hold(size, what)
        if msg.get("ok") is True:
            return msg.get("result")
        reason, detail = msg.get("reason"), str(msg.get("detail", ""))[:2000]
        if reason not in REASONS:
            self._fail("protocol", f"{what}: unknown reason {reason!r}")
        if msg.get("fatal", True):
            self._fail(reason, detail)
        raise EnvError(reason, detail, fatal=False)

    def _hold(self, size: int, what: str) -> None:
        """Count a decoded reply against the episode's and the worker's bounds: what the
        parent keeps of an environment must not grow with what the environment prints."""
        self.held += size
        self._episode_held += size
        for held, mb, of in (
            (self._episode_held, self.cfg.episode_mb, "this episode's"),
            (self.held, self.cfg.session_mb, "this worker's"),
        ):
            if held > mb << 20:
                self._fail(
                    "flood",
                    f"{what}: {of} replies hold {held / (1 << 20):.0f} MiB, "
                    f"over the {mb} MiB bound",
                )

    def _fail(self, reason: str, detail: str):
        """Kill the worker and everything it started; this session now answers `reason`."""
        self._kill()
        self.dead = EnvError(reason, detail)
        raise self.dead

    def _died(self, what: str):
        """The worker's output closed: it exited or was killed. Say how, and why."""
        proc = self.proc
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        self._kill()
        rc = proc.returncode
        reason, how = "crash", f"exit status {rc}"
        sig = None
        if rc is not None and rc < 0:
            sig = -rc
        elif rc is not None and rc > 128:
            sig = rc - 128  # bwrap reports a child killed by signal N as 128+N
        if sig:
            name = (
                signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            )
            how = f"killed by {name}"
            if sig == signal.SIGXCPU:
                reason, how = "timeout", f"CPU time limit ({self.cfg.cpu_seconds}s) exceeded"
            elif sig == signal.SIGKILL and self.cgroup is not None and self.cgroup.oom_killed():
                reason, how = (
                    "memory",
                    f"memory limit ({self.cfg.cgroup_mb} MiB with children and tmpfs) exceeded",
                )
            elif sig == signal.SIGXFSZ:
                reason, how = "limit", f"file size limit ({self.cfg.file_mb} MiB) exceeded"
        tail = self.stderr_tail.strip().splitlines()[-3:]
        detail = f"{what}: worker died ({how})" + (": " + " | ".join(tail)[-500:] if tail else "")
        self.dead = EnvError(reason, detail)
        raise self.dead

    def _kill(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if self._pidfd is not None and proc.poll() is None:
            try:  # the sandbox's pid 1: its death takes the whole pid namespace with it
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                # bwrap exits once its pid 1 is reaped, and pid 1 finishes dying only
                # after SIGKILL went to every process of the namespace: when we return,
                # nothing the environment started runs any more (the kernel may take a
                # few more milliseconds to reap them).
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if isinstance(proc, ForkedProcess):
            proc.kill()  # through its pidfd: pid 1 of the worker's namespaces
        elif proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
