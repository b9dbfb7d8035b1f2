"""Hostile environments against EnvSession: each is contained with a reason code, the
host is unharmed, and a fresh session works afterwards."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from spade_cli.sandbox import EnvError, EnvSession, SandboxConfig
from spade_cli.sandbox import uids as sbuids

pytestmark = [pytest.mark.requires_bwrap, pytest.mark.usefixtures("worker_start")]

QUICK = SandboxConfig(call_timeout=1.0)
GOOD = textwrap.dedent("""
    import gymnasium as gym
    class Ok(gym.Env):
        metadata = {"name": "ok", "max_turns": 1}
        def reset(self, seed=None, options=None):
            return "say ok", {"hint": "ok", "solution": ["ok"]}
        def step(self, action):
            return "done", float(action == "ok"), True, False, {}
""")


def hostile(step_body: str) -> str:
    return (
        "import gymnasium as gym, os, sys, time, signal, socket, mmap\n"
        "class Hostile(gym.Env):\n"
        '    metadata = {"name": "hostile", "max_turns": 3}\n'
        "    def reset(self, seed=None, options=None):\n"
        '        return "o", {}\n'
        "    def step(self, action):\n"
        + textwrap.indent(textwrap.dedent(step_body), " " * 8)
        + "\n"
    )


def our_sandbox_processes() -> list[int]:
    """Host pids under any uid this test process hands to its workers."""
    lo = sbuids.UID_BASE + ((os.getpid() & 0xFFFFF) << 10)
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                uid = os.stat(f"/proc/{entry}").st_uid
            except OSError:
                continue
            if lo <= uid < lo + sbuids.UID_SLOTS:
                out.append(int(entry))
    return out


def gone(find, *args, within: float = 3.0) -> bool:
    """True once find(*args) is empty. Killed processes take a moment to be reaped
    after close() returns (the kernel finishes tearing the pid namespace down)."""
    deadline = time.monotonic() + within
    while find(*args):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def assert_unharmed(session: bool = True):
    """Nothing of ours left running, and a new session still does its job."""
    assert os.geteuid() != 0 or gone(our_sandbox_processes), our_sandbox_processes()
    if not session:
        return
    with EnvSession(GOOD, QUICK) as env:
        env.reset(seed=0)
        assert env.step("ok") == ("done", 1.0, True, False, {})


def run_hostile(body: str, cfg: SandboxConfig = QUICK, action: str = "a"):
    """Run one step of a hostile env; returns (result or EnvError, session)."""
    with EnvSession(hostile(body), cfg) as env:
        env.reset()
        try:
            return env.step(action), env
        except EnvError as e:
            return e, env


@pytest.mark.parametrize(
    "name,body,reason",
    [
        ("infinite loop", "while True: pass", "timeout"),
        ("sleep", "time.sleep(3600)", "timeout"),
        (
            "signal-proof sleep",
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(3600)",
            "timeout",
        ),
        ("memory bomb", "x = bytearray(8 << 30)", "memory"),
        ("growing memory", "x = []\nwhile True: x.append(bytearray(1 << 20))", "memory"),
        (
            "shared-mmap bomb",
            "m = mmap.mmap(-1, 8 << 30, flags=mmap.MAP_SHARED)\nm[-1] = 1",
            "memory",
        ),
        ("numpy bomb", "import numpy as np\nnp.ones((1 << 16, 1 << 16))", "memory"),
        ("fork bomb", "while True: os.fork()", "limit"),
        (
            "thread bomb",
            "import threading\nwhile True: threading.Thread(target=time.sleep, args=(60,)).start()",
            "limit",
        ),
        (
            "10 GB file",
            "with open('/tmp/big', 'wb') as f:\n    for _ in range(10240): f.write(b'x' * (1 << 20))",
            "limit",
        ),
        ("fd exhaustion", "fs = [open('/dev/null') for _ in range(100000)]", "limit"),
        ("stdout flood", "while True: print('x' * 1000)", "flood"),
        (
            "fd 1/2 flood",
            "while True:\n    os.write(1, b'y' * 65536)\n    os.write(2, b'z' * 65536)",
            "flood",
        ),
        ("protocol flood", "os.write(3, b'x' * (4 << 20))", "flood"),
        ("protocol garbage", "os.write(3, b'not json\\n')\ntime.sleep(1)", "protocol"),
        (
            "forged reply",
            'os.write(3, b\'{"id": 424242, "ok": true, "result": 1}\\n\')\ntime.sleep(1)',
            "protocol",
        ),
        ("segfault", "import ctypes\nctypes.string_at(0)", "crash"),
        ("abort", "os.abort()", "crash"),
        ("exit", "os._exit(0)", "crash"),
        ("kill every visible process", "os.kill(-1, signal.SIGKILL)", "bad_step"),  # none are
    ],
)
def test_contained(name, body, reason):
    # Only the timeout cases need a short call limit; the rest get slack for a busy machine.
    cfg = QUICK if reason == "timeout" else SandboxConfig(call_timeout=10.0)
    if name == "10 GB file":
        cfg = SandboxConfig(call_timeout=10.0, file_mb=8, tmp_mb=64)
    out, env = run_hostile(body, cfg)
    assert isinstance(out, EnvError), f"{name}: not contained: {out!r}"
    # A thread bomb on a loaded machine may use up its 10 s before its threads reach the
    # process limit: stopped by the clock or by the limit, it is contained either way.
    allowed = {reason, "timeout"} if name == "thread bomb" else {reason}
    assert out.reason in allowed, f"{name}: {out}"
    assert out.fatal == (reason != "bad_step")
    assert_unharmed(session=False)  # the next test's session is the "later session"


def test_fork_bomb_swallowing_errors_is_killed_whole():
    body = "while True:\n    try: os.fork()\n    except OSError: pass"
    with EnvSession(hostile(body), SandboxConfig(call_timeout=1.5, nproc=16)) as env:
        env.reset()
        with pytest.raises(EnvError) as err:
            env.step("a")
        assert err.value.reason == "timeout"
    assert_unharmed()


def test_process_limit_is_really_enforced():
    """RLIMIT_NPROC is ignored for host uid 0: count how many children a worker gets."""
    body = """
        kids = []
        try:
            while len(kids) < 200:
                pid = os.fork()
                if pid == 0:
                    time.sleep(30); os._exit(0)
                kids.append(pid)
        except OSError:
            pass
        for k in kids: os.kill(k, signal.SIGKILL)
        return str(len(kids)), 0.0, True, False, {}"""
    out, env = run_hostile(body, SandboxConfig(call_timeout=5.0, nproc=10))
    assert not isinstance(out, EnvError), out
    assert int(out[0]) < 10


def test_filling_tmp_and_shm_leaves_the_host_alone():
    marker = f"spade-hostile-{secrets.token_hex(4)}"
    for path in ("/tmp", "/dev/shm"):
        body = (
            f"with open('{path}/{marker}', 'wb') as f:\n    while True: f.write(b'x' * (1 << 20))"
        )
        out, _ = run_hostile(
            body, SandboxConfig(call_timeout=5.0, file_mb=1024, tmp_mb=8, shm_mb=4)
        )
        assert isinstance(out, EnvError) and out.reason == "limit", out
        assert "disk space" in out.detail
        assert not Path(path, marker).exists()
    assert_unharmed()


def test_reading_etc_shadow():
    out, _ = run_hostile("return open('/etc/shadow').read(), 0.0, True, False, {}")
    assert isinstance(out, EnvError) and out.reason == "bad_step"
    assert "FileNotFoundError" in out.detail  # the jail has no /etc/shadow at all
    if os.access("/etc/shadow", os.R_OK):
        first = Path("/etc/shadow").read_text().split(":")[0]
        assert first not in out.detail


def test_secrets_in_the_parent_environment(monkeypatch):
    token = "spade-secret-" + secrets.token_hex(8)
    monkeypatch.setenv("SPADE_TEST_SECRET", token)
    body = """
        seen = [repr(dict(os.environ))]
        for pid in ["self", "1"] + [p for p in os.listdir("/proc") if p.isdigit()]:
            for f in ("environ", "cmdline"):
                try:
                    seen.append(open(f"/proc/{pid}/{f}", "rb").read().decode(errors="replace"))
                except OSError as e:
                    seen.append(f"{pid}/{f}: {e.strerror}")
        return "\\n".join(seen), 0.0, True, False, {}"""
    with EnvSession(hostile(body), QUICK) as env:
        env.reset()
        obs = env.step("a")[0]
        assert token not in obs
        assert "SPADE_TEST_SECRET" not in obs
        if env.sandbox_pid:  # what the sandbox's pid 1 runs with, as the host sees it
            assert token.encode() not in Path(f"/proc/{env.sandbox_pid}/environ").read_bytes()
        bwrap = env.forks.pid if env.forks else env.sandbox_pid
        if bwrap:  # and bwrap itself: nothing
            assert Path(f"/proc/{bwrap}/environ").read_bytes() == b""
    assert_unharmed()


@pytest.mark.skipif(
    not os.path.exists("/proc/sys/kernel/printk_ratelimit"), reason="no such sysctl"
)
def test_writing_host_proc_sys():
    path = "/proc/sys/kernel/printk_ratelimit"
    before = Path(path).read_text()
    # Writes back the current value: harmless even if the sandbox were broken.
    body = f'''
        errors = []
        for p in ("{path}", "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger"):
            try:
                with open(p, "w") as f:
                    f.write(open("{path}").read() if p == "{path}" else "")
                errors.append("WROTE " + p)
            except OSError as e:
                errors.append(f"{{p}}: {{e.errno}}")
        return "\\n".join(errors), 0.0, True, False, {{}}'''
    out, _ = run_hostile(body)
    assert not isinstance(out, EnvError), out
    assert "WROTE" not in out[0], out[0]
    assert Path(path).read_text() == before
    assert_unharmed()


def test_connecting_to_a_localhost_port():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    body = f"""
        results = []
        for host in ("127.0.0.1", "localhost", "10.0.2.2", "8.8.8.8"):
            try:
                socket.create_connection((host, {port}), timeout=0.5).close()
                results.append("CONNECTED " + host)
            except OSError as e:
                results.append(f"{{host}}: {{e}}")
        return "\\n".join(results), 0.0, True, False, {{}}"""
    try:
        out, _ = run_hostile(body, SandboxConfig(call_timeout=5.0))
        assert not isinstance(out, EnvError), out
        assert "CONNECTED" not in out[0], out[0]
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert_unharmed()


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the seccomp filter is x86_64-only")
def test_no_new_namespaces_mounts_or_ptrace():
    """In a user namespace of its own the environment could mount an unbounded tmpfs
    (host memory) and reach capability-gated kernel code: the seccomp filter says no."""
    body = """
        import ctypes, threading
        libc = ctypes.CDLL(None, use_errno=True)
        out = [libc.unshare(f) == 0 for f in (0x10000000, 0x10020000, 0x20000000, 0x40000000, 0x00020000)]
        out.append(libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0) == 0)  # clone(CLONE_NEWUSER)
        out.append(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) == 0)
        out.append(libc.syscall(101, 16, 1, 0, 0) == 0)  # ptrace(ATTACH, pid 1)
        t = threading.Thread(target=lambda: None); t.start(); t.join()  # threads still work
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)  # and so do processes
        return str(out), 0.0, True, False, {}"""
    out, _ = run_hostile(body, SandboxConfig(call_timeout=10.0))
    assert not isinstance(out, EnvError), out
    assert out[0] == str([False] * 8)
    assert_unharmed(session=False)


def test_killing_the_parent():
    me = os.getpid()
    body = f"""
        for pid in (os.getppid(), 1, {me}):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return "still here", 0.0, True, False, {{}}"""
    out, _ = run_hostile(body)
    assert out == ("still here", 0.0, True, False, {})  # nothing it could reach
    assert_unharmed()


DAEMON = """
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            while True: time.sleep(1)
        os._exit(0)
    time.sleep(0.2)
    return "daemon started", 0.0, True, False, {}"""


def ns_processes(ns: str) -> list[int]:
    """Host pids whose pid namespace is `ns` (as readlink /proc/PID/ns/pid says)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == ns:
                    out.append(int(entry))
            except OSError:
                pass
    return out


def test_a_detached_daemon_does_not_survive():
    with EnvSession(hostile(DAEMON), QUICK) as env:
        env.reset()
        assert env.step("a")[0] == "daemon started"
        ns = os.readlink(f"/proc/{env.sandbox_pid}/ns/pid")
        assert len(ns_processes(ns)) >= 3  # pid 1, worker, daemon: the check below can fail
    assert gone(ns_processes, ns), ns_processes(ns)
    assert_unharmed()


def test_nothing_survives_a_killed_parent():
    script = textwrap.dedent(f"""
        import os, time
        from spade_cli.sandbox import EnvSession, SandboxConfig
        env = EnvSession({hostile(DAEMON)!r}, SandboxConfig())
        env.reset(); env.step("a")
        print(os.readlink(f"/proc/{{env.sandbox_pid}}/ns/pid"), flush=True)
        time.sleep(60)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        ns = parent.stdout.readline().strip()
        assert len(ns_processes(ns)) >= 3
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    assert gone(ns_processes, ns, within=5.0), ns_processes(ns)


def test_runaway_recursion():
    out, env = run_hostile("return self.step(action)")
    assert isinstance(out, EnvError) and out.reason == "bad_step" and "RecursionError" in out.detail
    assert not out.fatal  # an exception of the environment's own: the worker lives on
    # With the recursion limit lifted, C-level recursion overflows the C stack: a segfault.
    body = (
        "import json\nsys.setrecursionlimit(10**6)\nx = []\nfor _ in range(10**5): x = [x]\n"
        "return json.dumps(x), 0.0, True, False, {}"
    )
    out, env = run_hostile(body, SandboxConfig(call_timeout=5.0))
    assert isinstance(out, EnvError) and out.reason in ("crash", "memory"), out
    assert_unharmed()


def test_import_time_attacks_are_contained_too():
    for code, reason in [
        ("while True: pass", "timeout"),
        ("import os\nos.abort()", "crash"),
        ("x = bytearray(8 << 30)", "memory"),
    ]:
        with pytest.raises(EnvError) as err:
            EnvSession(code, QUICK)
        assert err.value.reason == reason, (code, err.value)
    assert_unharmed()


# Two workers alive at once (of one environment, as in a rollout) must not be able to
# reach each other: a channel between episodes would let an environment tell its
# no-hint episodes from its hinted ones (the order they start in) and fake regret.
PLANT = """
    import json, socket as sk
    if hasattr(self, "keep"):
        return "still here", 0.0, False, False, {}
    fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
    open("/tmp/mark", "w").write("x")
    open("/dev/shm/mark", "w").write("x")
    s = sk.socket(sk.AF_UNIX, sk.SOCK_STREAM)
    s.bind("\\0spade-mark")
    s.listen()
    self.keep = s
    tcp = sk.socket()
    try:
        tcp.bind(("127.0.0.1", 47321)); tcp.listen(); self.keep_tcp = tcp
    except OSError:
        pass
    status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
    caps = {k: v.strip() for k, v in status.items() if k.startswith("Cap")}
    return json.dumps({"uid": os.getuid(), "caps": caps, "fds": fds}), 0.0, False, False, {}"""

PROBE = """
    import json, socket as sk
    seen = {"files": [p for p in ("/tmp/mark", "/dev/shm/mark") if os.path.exists(p)],
            "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
    for name, family, addr in (("abstract", sk.AF_UNIX, "\\0spade-mark"), ("tcp", sk.AF_INET, ("127.0.0.1", 47321))):
        try:
            sk.socket(family).connect(addr)
            seen[name] = "CONNECTED"
        except OSError as e:
            seen[name] = e.strerror
    try:
        os.kill(-1, signal.SIGKILL)
        seen["kill"] = "KILLED SOMETHING"
    except OSError as e:
        seen["kill"] = e.strerror
    return json.dumps(seen), 0.0, True, False, {}"""


def test_workers_alive_together_share_nothing():
    import json

    with EnvSession(hostile(PLANT), QUICK) as a, EnvSession(hostile(PROBE), QUICK) as b:
        a.reset()
        b.reset()
        planted = json.loads(a.step("a")[0])
        seen = json.loads(b.step("a")[0])
        assert a.step("a")[0]  # a lives on: b killed nothing of it
    assert seen["files"] == [], seen
    assert seen["abstract"] != "CONNECTED" and seen["tcp"] != "CONNECTED", seen
    assert seen["kill"] != "KILLED SOMETHING", seen
    assert len(seen["pids"]) <= 3, seen  # its pid 1 (the sandbox's) and itself, at most
    assert set(planted["caps"]) == {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}, planted
    assert set(planted["caps"].values()) == {"0000000000000000"}, planted  # none, not even bounded
    # stdin, stdout/stderr (the output sink), the protocol channel, and the listing itself
    assert planted["fds"] == [0, 1, 2, 3, 4], planted
    if os.geteuid() == 0:
        assert planted["uid"] != 0 and a.uid != b.uid
    assert_unharmed()


def test_a_killed_fork_server_takes_its_workers_and_is_restarted(worker_start):
    if worker_start != "forked":
        pytest.skip("fork server only")
    env = EnvSession(GOOD, QUICK)
    env.reset(seed=0)
    ns = os.readlink(f"/proc/{env.sandbox_pid}/ns/pid")
    os.kill(env.forks.pid, signal.SIGKILL)
    assert gone(ns_processes, ns), ns_processes(ns)
    with pytest.raises(EnvError) as err:
        env.step("ok")
    assert err.value.reason == "crash"
    env.close()
    assert_unharmed()  # a new session: the server starts again
