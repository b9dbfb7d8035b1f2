"""EnvSession: the protocol, reason codes, limits and the shape of the jail."""

from __future__ import annotations

import os
import shutil
import textwrap
import threading

import pytest

from spade_cli.errors import ResourceError
from spade_cli.sandbox import EnvError, EnvSession, SandboxConfig, check_sandbox, run_pool
from spade_cli.sandbox import config as sbconfig

pytestmark = pytest.mark.usefixtures("worker_start")  # forked workers and workers of their own

GUESS = textwrap.dedent("""
    import gymnasium as gym

    class Guess(gym.Env):
        metadata = {"name": "guess", "max_turns": 3}

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.n = int(self.np_random.integers(0, 1000))
            return f"guess {self.n}", {"hint": "repeat it", "solution": [str(self.n)]}

        def step(self, action):
            ok = action.strip() == str(self.n)
            return ("right" if ok else "wrong"), float(ok), ok, False, {"n": self.n}
""")

FAST = SandboxConfig(call_timeout=3.0)


def env_with(step_body: str, reset_body: str = 'return "o", {}', header: str = "") -> str:
    """A module whose Env.step runs `step_body` (indented code)."""
    return (
        f"import gymnasium as gym, os, sys, time\n{header}\n"
        "class E(gym.Env):\n"
        '    metadata = {"name": "t", "max_turns": 3}\n'
        "    def reset(self, seed=None, options=None):\n"
        + textwrap.indent(textwrap.dedent(reset_body), " " * 8)
        + "\n"
        "    def step(self, action):\n"
        + textwrap.indent(textwrap.dedent(step_body), " " * 8)
        + "\n"
    )


def reason_of(code: str, cfg: SandboxConfig = FAST, action="a") -> EnvError:
    with pytest.raises(EnvError) as err:
        with EnvSession(code, cfg) as env:
            env.reset(seed=0)
            env.step(action)
    return err.value


@pytest.mark.requires_bwrap
def test_episode_round_trip_and_determinism():
    with EnvSession(GUESS, FAST) as env:
        assert env.metadata == {"name": "guess", "max_turns": 3}
        assert env.class_name == "Guess"
        obs, info = env.reset(seed=7)
        n = info["solution"][0]
        assert obs == f"guess {n}" and info["hint"] == "repeat it"
        assert env.step("nope") == ("wrong", 0.0, False, False, {"n": int(n)})
        assert env.step(n)[1:3] == (1.0, True)
        env.renew()
        assert env.reset(seed=7) == (obs, info)
        assert env.reset(seed=8) != (obs, info)
        assert env.alive


@pytest.mark.requires_bwrap
def test_renew_reload_restarts_module_state():
    code = env_with(
        "return str(COUNT), 0.0, True, False, {}",
        reset_body="global COUNT\nCOUNT += 1\nreturn str(COUNT), {}",
        header="COUNT = 0",
    )
    with EnvSession(code, FAST) as env:
        assert env.reset()[0] == "1"
        env.renew()
        assert env.reset()[0] == "2"  # same module, fresh instance
        env.renew(reload=True)
        assert env.reset()[0] == "1"  # module executed again


@pytest.mark.parametrize(
    "code,reason",
    [
        ("def broken(:\n", "syntax_error"),
        ("import gymnasium\nraise ValueError('at import')\n", "import_crash"),
        ("import sys\nsys.exit(3)\n", "import_crash"),
        ("import not_a_real_module_xyz\n", "import_crash"),
        ("x = 1\n", "no_env_class"),
        (
            "import gymnasium as gym\nclass A(gym.Env): pass\nclass B(gym.Env): pass\n",
            "no_env_class",
        ),
        (
            "import gymnasium as gym\nclass A(gym.Env):\n    def __init__(self): raise RuntimeError('no')\n",
            "import_crash",
        ),
    ],
)
@pytest.mark.requires_bwrap
def test_load_failures_have_reason_codes(code, reason):
    with pytest.raises(EnvError) as err:
        EnvSession(code, FAST)
    assert err.value.reason == reason, err.value


@pytest.mark.requires_bwrap
def test_base_and_subclass_pick_the_leaf():
    code = GUESS + "\nclass Base(gym.Env):\n    pass\n\nclass Leaf(Base):\n    pass\n"
    with pytest.raises(EnvError) as err:  # Guess and Leaf are both leaves
        EnvSession(code, FAST)
    assert err.value.reason == "no_env_class" and "Guess" in err.value.detail
    code = GUESS.replace(
        "class Guess(gym.Env)", "class Base(gym.Env):\n    pass\n\nclass Guess(Base)"
    )
    with EnvSession(code, FAST) as env:
        assert env.class_name == "Guess"


@pytest.mark.requires_bwrap
def test_env_exceptions_are_not_fatal():
    code = env_with(
        'if action == "boom": raise KeyError(action)\nreturn "o", 0.5, False, False, {}',
        reset_body='if options: return "only one"\nreturn "o", {}',
    )
    with EnvSession(code, FAST) as env:
        with pytest.raises(EnvError) as err:
            env.step("boom")
        assert err.value.reason == "bad_step" and not err.value.fatal
        assert "KeyError" in err.value.detail and "line" in err.value.detail
        assert env.step("fine") == ("o", 0.5, False, False, {})
        with pytest.raises(EnvError) as err:
            env.reset(options={"x": 1})
        assert err.value.reason == "bad_reset"
        assert env.reset() == ("o", {})


@pytest.mark.requires_bwrap
def test_unserialisable_and_numpy_values():
    code = env_with(
        "import numpy as np\n"
        'if action == "obj": return object(), 0.0, False, False, {}\n'
        'if action == "nan": return "o", float("nan"), False, False, {}\n'
        'return "o", np.float32(0.5), np.bool_(True), False, {"a": np.arange(3), "t": (1, 2)}'
    )
    with EnvSession(code, FAST) as env:
        env.reset()
        assert env.step("x") == ("o", 0.5, True, False, {"a": [0, 1, 2], "t": [1, 2]})
        with pytest.raises(EnvError) as err:
            env.step("obj")
        assert err.value.reason == "bad_step" and "JSON" in err.value.detail
        r = env.step("nan")[1]  # non-finite rewards reach the caller as they are
        assert r != r


@pytest.mark.requires_bwrap
def test_reply_cap():
    code = env_with('return "x" * int(action), 0.0, False, False, {}')
    cfg = SandboxConfig(call_timeout=3.0, reply_bytes=100_000)
    with EnvSession(code, cfg) as env:
        env.reset()
        assert len(env.step("50000")[0]) == 50000
        with pytest.raises(EnvError) as err:
            env.step("200000")
        assert err.value.reason == "flood"
        with pytest.raises(EnvError):  # the worker is gone; every later call says so
            env.step("1")
        assert not env.alive


@pytest.mark.requires_bwrap
def test_call_and_episode_timeouts():
    code = env_with('time.sleep(float(action))\nreturn "o", 0.0, False, False, {}')
    cfg = SandboxConfig(call_timeout=1.0, episode_timeout=1.5)
    with EnvSession(code, cfg) as env:
        env.reset()
        env.step("0.6")
        env.step("0.6")
        with pytest.raises(EnvError) as err:
            env.step("0.6")  # each call is fine, the episode is not
        assert err.value.reason == "timeout" and "episode" in err.value.detail


@pytest.mark.requires_bwrap
def test_cpu_limit_is_a_timeout():
    code = env_with("while True: pass")
    err = reason_of(code, SandboxConfig(call_timeout=20.0, cpu_seconds=1))
    assert err.reason == "timeout" and "CPU" in err.detail


@pytest.mark.requires_bwrap
def test_the_jail():
    """Non-root uid, no capabilities, no-new-privs, an empty environment, a minimal
    read-only file system with only gymnasium's packages, and no network."""
    code = env_with(
        textwrap.dedent("""
        import json, socket
        st = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
        out = {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(),
               "caps": [st[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")],
               "nnp": st["NoNewPrivs"].strip(), "seccomp": st["Seccomp"].strip(), "env": dict(os.environ), "root": sorted(os.listdir("/")),
               "usr": sorted(os.listdir("/usr")), "site": sorted(os.listdir(os.path.dirname(gym.__path__[0]))),
               "pid": os.getpid(), "mounts": open("/proc/self/mounts").read(),
               "ifaces": [n for _, n in socket.if_nameindex()],
               "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")
                             if os.path.exists(f"/proc/self/fd/{fd}"))}
        for mod in ("torch", "transformers", "spade_cli"):
            try:
                __import__(mod); out[mod] = "importable"
            except ImportError:
                out[mod] = "absent"
        for path in ("/opt/python/lib/python3.11/os.py", "/usr/lib/x", "/x", "/opt/x", "/dev/x", "/proc/x"):
            try:
                open(path, "a").close(); out[path] = "writable"
            except OSError as e:
                out[path] = e.errno
        return json.dumps(out), 0.0, True, False, {}""")
    )
    import errno
    import json

    with EnvSession(code, FAST) as env:
        env.reset()
        out = json.loads(env.step("x")[0])
    if os.geteuid() == 0:
        assert out["uid"] == out["euid"] == env.uid != 0 and out["gid"] == out["uid"]
        assert out["caps"] == ["0000000000000000"] * 5
    assert out["uid"] != 0
    assert out["nnp"] == "1"
    if os.uname().machine == "x86_64":
        assert out["seccomp"] == "2"  # a filter is installed
    allowed = set(sbconfig.jail_env(SandboxConfig(), sbconfig.python_layout()))
    allowed |= {"PWD", "PYGAME_HIDE_SUPPORT_PROMPT"}  # set by bwrap --chdir / gymnasium itself
    assert set(out["env"]) <= allowed, out["env"]
    assert out["root"] == ["dev", "etc", "lib", "lib64", "opt", "proc", "tmp", "usr"] or set(
        out["root"]
    ) <= {"dev", "etc", "lib", "lib64", "lib32", "opt", "proc", "tmp", "usr"}
    assert "bin" not in out["usr"] and "sbin" not in out["usr"]
    assert out["torch"] == out["transformers"] == out["spade_cli"] == "absent"
    assert "torch" not in out["site"] and "gymnasium" in out["site"] and "numpy" in out["site"]
    assert out["pid"] == 2  # own pid namespace: bwrap's init is 1
    assert out["ifaces"] == ["lo"]
    assert out["fds"] == [0, 1, 2, 3]  # stdio + the protocol channel: nothing of the host's
    for path in (
        "/opt/python/lib/python3.11/os.py",
        "/usr/lib/x",
        "/x",
        "/opt/x",
        "/dev/x",
        "/proc/x",
    ):
        assert out[path] in (errno.EROFS, errno.EACCES, errno.ENOENT), (path, out[path])
    mounts = {line.split()[1]: line.split()[3] for line in out["mounts"].splitlines()}
    assert mounts["/tmp"].startswith("rw") and "size=16384k" in mounts["/tmp"]
    assert mounts["/dev/shm"].startswith("rw") and "size=4096k" in mounts["/dev/shm"]
    for ro in ("/", "/dev", "/proc", "/usr/lib", "/opt/python/lib/python3.11"):
        assert mounts[ro].startswith("ro"), (ro, mounts[ro])


@pytest.mark.requires_bwrap
def test_run_pool_runs_sessions_concurrently():
    threads = set()

    def episode(seed):
        threads.add(threading.get_ident())
        with EnvSession(GUESS, FAST) as env:
            obs, info = env.reset(seed=seed)
            return env.step(info["solution"][0])[1]

    assert run_pool(episode, range(6), max_workers=3) == [1.0] * 6
    assert len(threads) > 1


def test_missing_bwrap_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ResourceError) as err:
        check_sandbox()
    assert "apt-get install bubblewrap" in str(err.value)
    assert "--unsafe-no-sandbox" in str(err.value)
    with pytest.raises(ResourceError):
        EnvSession(GUESS, FAST)


def test_unsafe_mode_warns_and_keeps_rlimits(capsys, monkeypatch, tmp_path):
    from spade_cli.sandbox import notices

    monkeypatch.setattr(notices, "_warned", False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap needed
    cfg = SandboxConfig(unsafe=True, call_timeout=3.0)
    with EnvSession(GUESS, cfg) as env:
        obs, info = env.reset(seed=3)
        assert env.step(info["solution"][0])[1] == 1.0
    assert "WITHOUT bubblewrap" in capsys.readouterr().err
    err = reason_of(env_with("x = bytearray(2**34)"), cfg)
    assert err.reason == "memory"
    err = reason_of(env_with("while True: pass"), SandboxConfig(unsafe=True, call_timeout=0.5))
    assert err.reason == "timeout"


@pytest.mark.requires_bwrap
def test_printing_more_than_a_pipe_holds_does_not_deadlock():
    """The parent drains stderr while it waits: 300 kB of prints (a pipe holds 64 kB)."""
    code = env_with(
        'for i in range(3000): print(f"line {i:04d}", "x" * 90)\nreturn "o", 0.0, False, False, {}'
    )
    with EnvSession(code, FAST) as env:
        env.reset()
        assert env.step("a")[0] == "o"
        assert "line 2999" in env.stderr_tail
        assert env.step("a")[0] == "o"  # the per-call output budget starts over


@pytest.mark.requires_bwrap
def test_session_outlives_the_thread_that_created_it():
    """--die-with-parent follows the forking *thread*; workers are forked by a keeper."""
    box = []
    t = threading.Thread(target=lambda: box.append(EnvSession(GUESS, FAST)))
    t.start()
    t.join()
    with box[0] as env:
        obs, info = env.reset(seed=1)
        assert env.step(info["solution"][0])[1] == 1.0


def test_env_error_pickles_and_require_sandbox(monkeypatch, tmp_path, capsys):
    import pickle

    from spade_cli.sandbox import notices, require_sandbox

    e = pickle.loads(pickle.dumps(EnvError("timeout", "step()", fatal=False)))
    assert (e.reason, e.detail, e.fatal, str(e)) == ("timeout", "step()", False, "timeout: step()")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ResourceError):
        require_sandbox(unsafe=False)
    monkeypatch.setattr(notices, "_warned", False)
    require_sandbox(unsafe=True)
    assert "WARNING" in capsys.readouterr().err


@pytest.mark.requires_bwrap
def test_same_string_hashes_in_every_worker():
    """Set iteration order depends on string hashes: fixed, so episodes agree across workers."""
    code = env_with(
        'return str(list({"alpha", "beta", "gamma", "delta", "eps"})), 0.0, True, False, {}'
    )
    outs = set()
    for unsafe in (False, False, True):
        with EnvSession(code, SandboxConfig(call_timeout=3.0, unsafe=unsafe)) as env:
            env.reset()
            outs.add(env.step("a")[0])
    assert len(outs) == 1


UNPRIVILEGED = textwrap.dedent("""
    import os, sys
    from spade_cli.sandbox import EnvSession, EnvError, SandboxConfig
    code = sys.argv[1]
    with EnvSession(code, SandboxConfig(call_timeout=5.0)) as env:
        obs, info = env.reset(seed=2)
        assert env.step(info["solution"][0])[1] == 1.0
    fork_bomb = code.replace('ok = action.strip() == str(self.n)', 'while True: os.fork()')
    fork_bomb = "import os\\n" + fork_bomb
    try:
        with EnvSession(fork_bomb, SandboxConfig(call_timeout=10.0, nproc=16)) as env:
            env.reset()
            env.step("x")
    except EnvError as e:
        print(e.reason)
""")


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to become another user"
)
@pytest.mark.requires_bwrap
def test_unprivileged_user_path():
    """bwrap's user-namespace path, as an ordinary user runs it (uid 65534 here)."""
    import subprocess
    import sys

    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    env = {**os.environ, "HOME": "/tmp"}
    # What the sandbox will bind (the base interpreter behind a venv, its stdlib, the
    # packages, worker.py), checked as that user: running some Python is not enough.
    probe = subprocess.run(
        drop
        + [
            sys.executable,
            "-c",
            "from spade_cli.sandbox.config import "
            "unreadable_binds; print(*unreadable_binds(), sep='\\n')",
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd="/",
    )
    if probe.returncode != 0:
        pytest.skip("this Python or checkout is not readable by an unprivileged user")
    if probe.stdout.strip():
        # The sandbox refuses with one clear line naming the first such path.
        refused = subprocess.run(
            drop
            + [
                sys.executable,
                "-c",
                "from spade_cli.sandbox import check_sandbox; check_sandbox()",
            ],
            env=env,
            capture_output=True,
            text=True,
            cwd="/",
        )
        assert refused.returncode != 0 and "cannot read it" in refused.stderr, refused.stderr
        pytest.skip(
            "the sandbox binds paths an unprivileged user cannot read: " + probe.stdout.split()[0]
        )
    out = subprocess.run(
        drop + [sys.executable, "-c", UNPRIVILEGED, GUESS],
        env=env,
        capture_output=True,
        text=True,
        cwd="/",
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "limit"  # RLIMIT_NPROC holds in the user namespace too


@pytest.mark.requires_bwrap
def test_sessions_fall_back_to_a_bwrap_each_when_forking_cannot_work(
    worker_start, monkeypatch, capsys
):
    import subprocess

    from spade_cli.sandbox import forkserver

    if worker_start != "forked":
        pytest.skip("fork server only")
    monkeypatch.setattr(forkserver, "_servers", {})

    def cannot_start(self):
        raise EnvError("crash", "the fork server did not start: no pidfds here")

    monkeypatch.setattr(forkserver.ForkServer, "_start", cannot_start)
    for _ in range(2):
        with EnvSession(GUESS, FAST) as env:
            assert isinstance(env.proc, subprocess.Popen)  # a bwrap of its own
            obs, info = env.reset(seed=0)
            assert env.step(info["solution"][0])[1] == 1.0
    err = capsys.readouterr().err
    assert err.count("cannot be forked here") == 1 and "no pidfds here" in err
