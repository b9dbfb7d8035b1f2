"""One bound on a worker's memory: children, tmpfs, SysV shared memory and memfds
cannot take a worker past memory_mb + tmp_mb + shm_mb."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from spade_cli.sandbox import EnvError, EnvSession, SandboxConfig, cgroup

pytestmark = [pytest.mark.requires_bwrap, pytest.mark.usefixtures("worker_start")]

CFG = SandboxConfig(call_timeout=20.0)


def peak_bytes(cg) -> int:
    name = "memory.max_usage_in_bytes" if cg.version == 1 else "memory.peak"
    with open(os.path.join(cg.path, name)) as f:
        return int(f.read())


def env(step: str) -> str:
    return (
        "import ctypes, json, os, time\nimport gymnasium as gym\n"
        "class Greedy(gym.Env):\n"
        '    metadata = {"name": "greedy", "max_turns": 1}\n'
        "    def reset(self, seed=None, options=None):\n"
        '        return "o", {}\n'
        "    def step(self, action):\n" + textwrap.indent(textwrap.dedent(step), " " * 8) + "\n"
    )


CHILDREN = env("""
    kids = []
    for i in range(6):  # 6 x 250 MiB, each within its own RLIMIT_AS
        pid = os.fork()
        if pid == 0:
            x = bytearray(250 << 20)
            for j in range(0, len(x), 4096):
                x[j] = 1
            time.sleep(3)
            os._exit(0)
        kids.append(pid)
    ends = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in kids]
    return json.dumps(ends), 0.0, True, False, {}
""")


@pytest.mark.skipif(
    not cgroup.available(), reason="no memory cgroup here (needs root and the memory controller)"
)
def test_children_share_the_workers_memory_bound():
    with EnvSession(CHILDREN, CFG) as s:
        s.reset()
        ends = json.loads(s.step("a")[0])
        peak = peak_bytes(s.cgroup)
    assert peak <= CFG.cgroup_mb << 20
    assert ends.count(-9) >= 3, ends  # the kernel killed children for the bound


def test_what_cannot_be_counted_is_refused():
    code = env("""
    libc = ctypes.CDLL(None, use_errno=True)
    out = {}
    for name, nr, args in (("shmget", 29, (0, 64 << 20, 0o1000 | 0o600)), ("memfd_create", 319, (b"x", 0)),
                           ("msgget", 68, (0, 0o1000 | 0o600))):
        out[name] = libc.syscall(nr, *args) >= 0 or ctypes.get_errno()
    return json.dumps(out), 0.0, True, False, {}
""")
    with EnvSession(code, CFG) as s:
        s.reset()
        out = json.loads(s.step("a")[0])
    assert out == {"shmget": 1, "memfd_create": 1, "msgget": 1}, out  # EPERM each


def test_empty_directories_cannot_eat_kernel_memory(worker_start):
    code = env("""
    n = 0
    try:
        for n in range(250000):
            os.mkdir("/tmp/d%d" % n)
    except OSError as e:
        return json.dumps([n, e.errno]), 0.0, True, False, {}
    return json.dumps([n, 0]), 0.0, True, False, {}
""")
    with EnvSession(code, CFG) as s:
        s.reset()
        try:
            made, err = json.loads(s.step("a")[0])
        except EnvError as e:  # ENOSPC is the 'limit' reason
            assert e.reason in ("limit", "memory"), e
            made, err = None, None
        peak = peak_bytes(s.cgroup) if s.cgroup is not None else None
    if worker_start == "forked":
        assert made is None or (made < 5000 and err == 28), (made, err)  # ENOSPC: the inode cap
    elif peak is not None:  # bwrap's own tmpfs has no inode cap: the memory cgroup counts them
        assert peak <= CFG.cgroup_mb << 20
