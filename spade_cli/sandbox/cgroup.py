"""A memory cgroup per worker: one limit on every page the worker and its children pin.

RLIMIT_AS bounds one process's address space. It does not see what a worker's children
allocate each on their own, tmpfs pages (/tmp, /dev/shm), pipe buffers, or the kernel
memory of a quarter of a million empty directories. A memory cgroup counts all of them
against one limit. As root, where the kernel offers the memory controller (cgroup v1's
`memory` hierarchy or v2's unified one), each worker's pid 1 joins a cgroup of its own,
created below ours, before anything untrusted runs: every process it starts is in it.

`WorkerCgroup.create(limit_mb)` returns one, or None where it cannot work here (not root,
no memory controller, a read-only /sys/fs/cgroup); `join_fd()` is a descriptor on its
`cgroup.procs` through which the worker joins ("0" written: the writer itself, so no pid
crosses a namespace); `oom_killed()` says whether the kernel killed for the limit.
"""

from __future__ import annotations

import atexit
import os
import queue
import secrets
import threading
import time
from functools import lru_cache

ROOT = "/sys/fs/cgroup"


@lru_cache(maxsize=1)
def _base() -> tuple[str, int] | None:
    """(directory our own memory cgroup is, cgroup version), or None."""
    if os.geteuid() != 0 or os.environ.get("SPADE_SANDBOX_CGROUP") == "0":
        return None
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _id, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            d = os.path.join(ROOT, "memory", path.lstrip("/"))
            if os.access(d, os.W_OK) and os.path.exists(os.path.join(d, "memory.limit_in_bytes")):
                return d, 1
    for line in lines:
        if line.startswith("0::"):
            d = os.path.join(ROOT, line[3:].lstrip("/"))
            try:
                with open(os.path.join(d, "cgroup.subtree_control")) as f:
                    if "memory" in f.read().split() and os.access(d, os.W_OK):
                        return d, 2
            except OSError:
                pass
    return None


def available() -> bool:
    return _base() is not None


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


class WorkerCgroup:
    def __init__(self, path: str, version: int, limit_mb: int):
        self.path, self.version, self.limit_mb = path, version, limit_mb

    @classmethod
    def create(cls, limit_mb: int) -> WorkerCgroup | None:
        base = _base()
        if base is None:
            return None
        d, version = base
        # A random name, not a counter: the worker must not learn how many came before it.
        name = f"spade-{os.getpid()}-{secrets.token_hex(6)}"
        path = os.path.join(d, name)
        limit = str(limit_mb << 20)
        try:
            os.mkdir(path)
        except OSError:
            return None
        try:
            if version == 1:
                _write(os.path.join(path, "memory.limit_in_bytes"), limit)
                memsw = os.path.join(path, "memory.memsw.limit_in_bytes")
                if os.path.exists(memsw):  # swap does not extend the bound
                    _write(memsw, limit)
            else:
                _write(os.path.join(path, "memory.max"), limit)
                if os.path.exists(os.path.join(path, "memory.swap.max")):
                    _write(os.path.join(path, "memory.swap.max"), "0")
        except OSError:
            os.rmdir(path)
            return None
        return cls(path, version, limit_mb)

    def join_fd(self) -> int:
        return os.open(os.path.join(self.path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)

    def oom_killed(self) -> bool:
        """The kernel killed a process of this cgroup for its limit."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            with open(os.path.join(self.path, name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and int(value) > 0:
                        return True
            if self.version == 1:
                with open(os.path.join(self.path, "memory.failcnt")) as f:
                    return int(f.read()) > 0
        except (OSError, ValueError):
            pass
        return False

    def remove(self, within: float = 2.0) -> None:
        """Delete the cgroup once its last process has gone (they are being killed)."""
        end = time.monotonic() + within
        while True:
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > end:
                    return  # left behind, empty soon; the kernel frees it with its parent
                time.sleep(0.005)


class _Remover:
    """Removes cgroups on a thread of its own: the last processes of a killed worker take
    a few milliseconds to go, and a session's close should not wait for that."""

    def __init__(self):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.started = False
        self.lock = threading.Lock()

    def put(self, cg: WorkerCgroup) -> None:
        with self.lock:
            if not self.started:
                self.started = True
                threading.Thread(target=self._run, daemon=True, name="sandbox-cgroups").start()
                atexit.register(self.drain)
        self.jobs.put(cg)

    def _run(self) -> None:
        while True:
            self.jobs.get().remove()

    def drain(self) -> None:
        while True:
            try:
                self.jobs.get_nowait().remove(within=0.5)
            except queue.Empty:
                return


_remover = _Remover()


def remove_later(cg: WorkerCgroup) -> None:
    _remover.put(cg)


def join_in_child(fd: int):
    """A subprocess preexec_fn putting the child (bwrap, before it forks anything) into
    the cgroup behind `fd`."""

    def join() -> None:
        os.write(fd, b"0")

    return join
