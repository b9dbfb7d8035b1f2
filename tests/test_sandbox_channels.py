"""Two workers alive together cannot talk: every channel a sender tries, a receiver
checks, and nothing crosses. Then the attack this matters for: an environment that tries
to tell hinted from no-hint episodes through such a channel earns no regret."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from spade_cli.regret import ScoreConfig, Scorer
from spade_cli.rollout import ReplayAgent, run_rollouts
from spade_cli.sandbox import EnvSession, SandboxConfig

pytestmark = [pytest.mark.requires_bwrap, pytest.mark.usefixtures("worker_start")]

CFG = SandboxConfig(call_timeout=3.0)

# Shared by sender and receiver: what each channel is and how to reach it.
COMMON = """
import ctypes, errno, fcntl, os, socket, struct
import gymnasium as gym

TOKEN = "spade-token-7c1f"
PORT = 47613
KEY = 0x5ADE
libc = ctypes.CDLL(None, use_errno=True)

def sys_call(*args):
    r = libc.syscall(*args)
    if r < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return r

def attempt(fn):
    try:
        return fn()
    except Exception as e:
        return "refused: " + type(e).__name__ + ": " + str(e)

SHARED = os.__file__  # the Python tree: the same file in every jail, read-only
MACHINE_WIDE = ("/proc/loadavg", "/proc/stat", "/proc/meminfo", "/proc/vmstat", "/proc/uptime",
                "/proc/sys/fs/file-nr", "/proc/sys/kernel/random/entropy_avail",
                "/proc/pressure/cpu", "/proc/interrupts", "/proc/locks", "/proc/cpuinfo")
"""

SENDER = (
    COMMON
    + """
KEEP = []

def plant():
    done = {}
    f = open(SHARED, "rb")
    KEEP.append(f)
    done["flock"] = attempt(lambda: fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB))
    done["posix lock"] = attempt(lambda: fcntl.fcntl(f, fcntl.F_SETLK, struct.pack("hhqqi", 0, 0, 7, 1, 0)))
    done["ofd lock"] = attempt(lambda: fcntl.fcntl(f, 37, struct.pack("hhqqi", 0, 0, 9, 1, 0)))
    done["lease"] = attempt(lambda: fcntl.fcntl(f, 1024, fcntl.F_RDLCK))
    for path in ("/tmp/" + TOKEN, "/dev/shm/" + TOKEN):
        done[path] = attempt(lambda p=path: open(p, "w").write(TOKEN))
    def listen_abstract():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind("\\0" + TOKEN)
        s.listen(1)
        KEEP.append(s)
    done["abstract"] = attempt(listen_abstract)
    def listen_tcp():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", PORT))
        s.listen(1)
        KEEP.append(s)
    done["tcp"] = attempt(listen_tcp)
    done["semget"] = attempt(lambda: sys_call(64, KEY, 1, 0o1000 | 0o666))
    done["shmget"] = attempt(lambda: sys_call(29, KEY, 4096, 0o1000 | 0o666))
    done["msgget"] = attempt(lambda: sys_call(68, KEY, 0o1000 | 0o666))
    done["pty"] = attempt(lambda: KEEP.append(os.open("/dev/ptmx", os.O_RDWR)))
    KEEP.extend(open(SHARED, "rb") for _ in range(20))  # /proc/sys/fs/file-nr
    KEEP.append(bytearray(32 << 20))  # /proc/meminfo, sysinfo
    for _ in range(4):  # /proc/loadavg's process count, /proc/stat's forks
        if os.fork() == 0:
            import time
            time.sleep(30)
            os._exit(0)
    for _ in range(3):  # busy files a peer could notice through inotify on the shared tree
        done["touch"] = attempt(lambda: open(SHARED, "rb").read(1))
    return done

class Sender(gym.Env):
    metadata = {"name": "sender", "max_turns": 1}
    def reset(self, seed=None, options=None):
        return json.dumps(plant(), default=repr), {}
    def step(self, action):
        return "", 0.0, True, False, {}

import json
"""
)

RECEIVER = (
    COMMON
    + """
import json, signal

def probe():
    seen = {}
    f = open(SHARED, "rb")
    seen["flock"] = attempt(lambda: fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB) or "free")
    seen["posix getlk"] = attempt(lambda: struct.unpack("hhqqi", fcntl.fcntl(
        f, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0)))[0] == fcntl.F_UNLCK and "free")
    seen["inotify"] = attempt(lambda: sys_call(294, 0))
    seen["fanotify"] = attempt(lambda: sys_call(300, 0, 0))
    seen["tmp"] = os.listdir("/tmp")
    seen["shm"] = os.listdir("/dev/shm")
    def connect(family, addr):
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(0.5)
        s.connect(addr)
        return "CONNECTED"
    seen["abstract"] = attempt(lambda: connect(socket.AF_UNIX, "\\0" + TOKEN))
    seen["tcp"] = attempt(lambda: connect(socket.AF_INET, ("127.0.0.1", PORT)))
    seen["semget"] = attempt(lambda: sys_call(64, KEY, 0, 0) >= 0 and "FOUND")
    seen["shmget"] = attempt(lambda: sys_call(29, KEY, 0, 0) >= 0 and "FOUND")
    seen["msgget"] = attempt(lambda: sys_call(68, KEY, 0) >= 0 and "FOUND")
    seen["pts"] = attempt(lambda: [n for n in os.listdir("/dev/pts") if n.isdigit()])
    seen["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    # Machine-wide counters the sender moves by forking, opening files, allocating.
    def read(path):
        with open(path) as f:
            return f.read(200)
    seen["machine"] = {p: attempt(lambda p=p: read(p)) for p in MACHINE_WIDE}
    seen["sysinfo"] = attempt(lambda: libc.sysinfo(ctypes.create_string_buffer(512)) == 0
                              and "READ" or "refused " + os.strerror(ctypes.get_errno()))
    def kill_others():
        hit = []
        for p in seen["pids"]:
            if p not in (os.getpid(), 1):
                try:
                    os.kill(p, signal.SIGUSR1)
                    hit.append(p)
                except OSError:
                    pass
        return hit
    seen["signalled"] = kill_others()
    return seen

class Receiver(gym.Env):
    metadata = {"name": "receiver", "max_turns": 1}
    def reset(self, seed=None, options=None):
        return json.dumps(probe()), {}
    def step(self, action):
        return "", 0.0, True, False, {}
"""
)


def test_nothing_crosses_between_two_workers():
    with EnvSession(SENDER, CFG) as a, EnvSession(RECEIVER, CFG) as b:
        planted = json.loads(a.reset()[0])
        seen = json.loads(b.reset()[0])
        a.renew()  # the sender still lives: nothing the receiver did reached it
    # The sender's own channels: locks, leases and SysV shared memory and queues refused.
    for what in ("flock", "posix lock", "ofd lock", "lease", "shmget", "msgget"):
        assert planted[what].startswith("refused"), (what, planted)
    # What it could make (files in its /tmp, sockets, a semaphore) stays its own.
    assert planted["/tmp/spade-token-7c1f"] == len("spade-token-7c1f")
    assert planted["abstract"] is None and planted["tcp"] is None
    assert seen["tmp"] == [] and seen["shm"] == [], seen
    for what in ("abstract", "tcp", "semget", "shmget", "msgget"):
        assert seen[what].startswith("refused"), (what, seen)
    for what in ("inotify", "fanotify"):
        assert seen[what].startswith("refused: PermissionError"), (what, seen)
    # Locks: neither taken nor read (a lock the receiver got would say "free").
    assert seen["flock"].startswith("refused") and seen["posix getlk"].startswith("refused"), seen
    assert seen["pts"] == [] or seen["pts"].startswith("refused"), seen
    assert len(seen["pids"]) <= 2 and seen["signalled"] == [], seen
    # No machine-wide counter: absent (forked workers' /proc holds processes only) or
    # covered (a worker's own bwrap), and sysinfo(2) refused.
    for path, got in seen["machine"].items():
        assert got.startswith("refused"), (path, got)
    assert seen["sysinfo"].startswith("refused"), seen


# --------------------------------------------------------------------------- the oracle

# Pays 1 only in the episode it believes is hinted. The two episodes of a pair play the
# same seed; the one started second finds the first's mark and takes itself for the
# hinted one (the runner once started every no-hint episode before the hinted ones).
ORACLE = textwrap.dedent('''
    import fcntl, os, socket, struct
    import gymnasium as gym

    def marked_before(seed):
        """True when a peer already marked this seed through any channel that works."""
        signs = []
        try:  # a read lock on byte `seed` of a file every jail shares
            f = open(os.__file__, "rb")
            where = struct.pack("hhqqi", fcntl.F_WRLCK, 0, seed % 100000, 1, 0)
            held = struct.unpack("hhqqi", fcntl.fcntl(f, fcntl.F_GETLK, where))[0] != fcntl.F_UNLCK
            fcntl.fcntl(f, fcntl.F_SETLK, struct.pack("hhqqi", fcntl.F_RDLCK, 0, seed % 100000, 1, 0))
            globals().setdefault("KEEP", []).append(f)
            signs.append(held)
        except OSError:
            signs.append(False)
        name = "\\0oracle-%d" % seed
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.bind(name)
            s.listen(1)
            globals().setdefault("KEEP", []).append(s)
            signs.append(False)
        except OSError:
            signs.append(True)
        path = "/tmp/oracle-%d" % seed
        signs.append(os.path.exists(path))
        open(path, "w").close()
        return any(signs)

    class Oracle(gym.Env):
        metadata = {"name": "oracle", "max_turns": 1}
        def reset(self, seed=None, options=None):
            self.hinted = marked_before(int(seed or 0))
            return "say go", {"hint": "say go", "solution": ["go"]}
        def step(self, action):
            return "done", 1.0 if self.hinted else 0.0, True, False, {}
''')


def test_a_condition_oracle_earns_no_regret():
    cand = {
        "kind": "candidate",
        "v": 1,
        "id": "oracle",
        "parents": [],
        "origin": "design",
        "validation": {"valid": True, "reason": "ok"},
        "env": {"code": ORACLE, "name": "oracle", "max_turns": 1},
    }
    (rec,) = run_rollouts([cand], ReplayAgent(), k=4, sandbox_cfg=CFG, batch_size=8, workers=4)
    nohint = [e["return"] for e in rec["rollouts"]["nohint"]]
    hint = [e["return"] for e in rec["rollouts"]["hint"]]
    assert nohint == hint, (nohint, hint)  # same actions, so the same returns
    # Its replays share a worker (rollout/verify.py), where the marks it left itself are
    # found: the paired episode's replay differs, and the candidate is refused outright.
    assert "the rewards differ" in rec["rollouts"]["nondeterministic"], rec["rollouts"]
    scored = Scorer(ScoreConfig()).score(rec)
    assert scored["score"]["reason"] == "nondeterministic", scored["score"]
    assert scored["score"].get("regret") is None


# --------------------------------------------------------------------------- identity

IDENTITY = """
import json, os
import gymnasium as gym

class Who(gym.Env):
    metadata = {"name": "who", "max_turns": 1}
    def reset(self, seed=None, options=None):
        paths = [line.split(":", 2)[2] for line in open("/proc/self/cgroup").read().splitlines()]
        return json.dumps({"uid": os.getuid(), "cgroups": paths}), {}
    def step(self, action):
        return "", 0.0, True, False, {}
"""


def test_a_worker_cannot_count_the_workers_before_it():
    """No ordinal in a worker's uid or cgroup: an environment that could tell it was
    started after its twin could tell the conditions of a pair apart by start order
    (pipe inode numbers still could; the pair's random start order is what keeps that
    from paying, docs/concepts/sandbox.md)."""
    seen = []
    for _ in range(6):
        with EnvSession(IDENTITY, CFG) as env:
            seen.append(json.loads(env.reset()[0]))
    assert all(set(s["cgroups"]) == {"/"} for s in seen), seen
    uids = [s["uid"] for s in seen]
    if os.geteuid() == 0:  # root mode: a host uid of its own each
        assert len(set(uids)) == 6 and uids != list(range(uids[0], uids[0] + 6)), uids


# --------------------------------------------------------------------------- the page cache

# A file every jail shares read-only (the stdlib), a page per bit of a 12-bit token.
PAGE_FILE = os.path.join(os.path.dirname(os.__file__), "pydoc_data", "topics.py")
TOKEN_12 = 0b1011_0110_1001
PAGES = [16 * i for i in range(12)]  # 64 KiB apart: no bit reads another's page ahead

PAGE_COMMON = f"""
import ctypes, json, mmap, os
import gymnasium as gym

PATH = os.path.join(os.path.dirname(os.__file__), "pydoc_data", "topics.py")
PAGES = {PAGES}
libc = ctypes.CDLL(None, use_errno=True)
"""

PAGE_SENDER = (
    PAGE_COMMON
    + f"""
class Sender(gym.Env):
    metadata = {{"name": "page-sender", "max_turns": 1}}
    def reset(self, seed=None, options=None):
        fd = os.open(PATH, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no readahead: one page per bit
        for bit, page in enumerate(PAGES):
            if {TOKEN_12} >> bit & 1:
                os.pread(fd, 1, page * 4096)
        os.close(fd)
        return "sent", {{}}
    def step(self, action):
        return "", 0.0, True, False, {{}}
"""
)

PAGE_RECEIVER = (
    PAGE_COMMON
    + """
def nowait():
    fd = os.open(PATH, os.O_RDONLY)
    bits = 0
    for bit, page in enumerate(PAGES):
        try:
            os.preadv(fd, [bytearray(1)], page * 4096, os.RWF_NOWAIT)
            bits |= 1 << bit  # served from the cache: someone read this page
        except BlockingIOError:
            pass
    return bits

def in_core():
    fd = os.open(PATH, os.O_RDONLY)
    size = os.fstat(fd).st_size
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    vec = ctypes.create_string_buffer(size // 4096 + 1)
    if libc.mincore(addr, size, vec) != 0:  # one byte per page: 1 = in the page cache
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return sum(1 << bit for bit, page in enumerate(PAGES) if vec.raw[page] & 1)

def cached_pages():
    rng = (ctypes.c_uint64 * 2)(0, 0)
    stat = (ctypes.c_uint64 * 8)()
    if libc.syscall(451, os.open(PATH, os.O_RDONLY), rng, stat, 0) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return stat[0]

def attempt(fn):
    try:
        return fn()
    except OSError as e:
        return "refused: " + os.strerror(e.errno)

class Receiver(gym.Env):
    metadata = {"name": "page-receiver", "max_turns": 1}
    def reset(self, seed=None, options=None):
        return json.dumps({"nowait": attempt(nowait), "mincore": attempt(in_core),
                           "cachestat": attempt(cached_pages)}), {}
    def step(self, action):
        return "", 0.0, True, False, {}
"""
)


def test_the_page_cache_of_shared_files_carries_nothing():
    fd = os.open(PAGE_FILE, os.O_RDONLY)  # host side: start from pages nobody has cached
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    with EnvSession(PAGE_SENDER, CFG) as a, EnvSession(PAGE_RECEIVER, CFG) as b:
        assert a.reset()[0] == "sent"
        seen = json.loads(b.reset()[0])
    assert seen == {
        "nowait": "refused: Operation not supported",
        "mincore": "refused: Operation not permitted",
        "cachestat": "refused: Operation not permitted",
    }, seen
