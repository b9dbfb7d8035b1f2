"""The sandboxed side of an EnvSession: one process holding one untrusted environment.

Runs inside bwrap (or, in unsafe mode, as a plain subprocess) as
`python -s -P -B worker.py SETTINGS_JSON`, or is forked from the fork server (the
zygote, below), and imports nothing from spade_cli: the package is not visible inside
the sandbox. Order matters, because everything after step 4 may be hostile:

  1. drop to the host uid the parent picked (root mode) and shed every capability,
  2. move the protocol channel off fd 1 (fd 1 and 2 of untrusted code go to the
     parent's bounded stderr sink),
  3. set the resource limits (hard = soft, so untrusted code cannot raise them) and
     install the parent's seccomp filter (steps 1 and 3: `jail.py`, beside this file),
  4. preload gymnasium and numpy, say "ready",
  5. read the module source (first stdin line), exec it, find the Env class,
     instantiate it, answer JSON-lines requests until stdin closes.

Requests:  {"id", "op": "reset", "seed", "options"} | {"id", "op": "step", "action"}
           | {"id", "op": "new", "reload": bool} | {"id", "op": "meta"}
Replies:   {"id", "ok": true, "result": ..., "t": seconds in env code}
           | {"id", "ok": false, "reason", "detail", "fatal": bool}
"""

import errno
import json
import os
import signal
import sys
import time
import traceback
import types

SETTINGS: dict = {}  # from argv (main) or the fork server's request (run_worker)
JAIL = None  # jail.py, loaded once by a fork server for all its workers
MAIN_PID = os.getpid()
PROTO = None  # fd of the protocol channel to the parent


# What a reply may hold. The parent checks the same bounds again (the environment runs in
# this process and can write to the channel itself): nesting deeper than the record
# writer or Python's recursion can handle, integers no JSON library reads back, and lone
# surrogates that no UTF-8 writer or tokenizer accepts would fail the whole stage.
MAX_DEPTH = 64
MAX_INT = 1 << 63


def protocol_problem(value, depth=MAX_DEPTH):
    """Why `value` (decoded JSON) may not cross the protocol, or None."""
    return protocol_scan(value, depth)[0]


def protocol_scan(value, depth=MAX_DEPTH):
    """(why `value` may not cross the protocol or None, the bytes its objects take).
    Iterative, so that a value nested 100,000 deep is judged rather than overflowing the
    stack. The size (sys.getsizeof of every object) is what the parent holds of a reply:
    a million small integers cost 30 times their JSON."""
    todo = [(value, 1)]
    size = 0
    while todo:
        x, d = todo.pop()
        size += sys.getsizeof(x)
        if isinstance(x, str):
            if not x.isascii():
                try:
                    x.encode("utf-8")
                except UnicodeEncodeError:
                    return "a string holds a lone surrogate (not valid Unicode text)", size
        elif isinstance(x, bool) or x is None or isinstance(x, float):
            continue
        elif isinstance(x, int):
            if not -MAX_INT <= x < MAX_INT:
                return f"an integer of {x.bit_length()} bits (limit: 64)", size
        elif isinstance(x, (list, tuple)):
            if d > depth:
                return f"nested deeper than {depth} levels", size
            todo.extend((v, d + 1) for v in x)
        elif isinstance(x, dict):
            if d > depth:
                return f"nested deeper than {depth} levels", size
            for k, v in x.items():
                if not isinstance(k, str):
                    return f"a dict key is a {type(k).__name__}, not a str", size
                todo.append((k, d + 1))
                todo.append((v, d + 1))
        else:
            return f"a {type(x).__name__} is not a JSON value", size
    return None, size


def plain(value):
    """numpy values and tuples/sets as plain JSON values, or TypeError (iterative too)."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    root = [value]
    todo = [(root, 0)]
    visits = 0
    while todo:
        visits += 1
        if visits > 1 << 20:  # a cycle, or a value too large for any reply anyway
            raise TypeError("a cyclic or too large value")
        box, key = todo.pop()
        x = box[key]
        if isinstance(x, (str, bool, int, float)) or x is None:
            continue
        if hasattr(x, "tolist") and type(x).__module__.startswith("numpy"):
            x = x.tolist()
            box[key] = x
            todo.append((box, key))
            continue
        if isinstance(x, (tuple, set, frozenset, list)):
            x = box[key] = list(x)
            todo.extend((x, i) for i in range(len(x)))
        elif isinstance(x, dict):
            # Keys as json.dumps writes them: 1 -> "1", True -> "true", None -> "null".
            x = box[key] = {
                k
                if isinstance(k, str)
                else json.dumps(k)
                if k is None or isinstance(k, (bool, int, float))
                else k: v
                for k, v in x.items()
            }
            todo.extend((x, k) for k in x)
        else:
            raise TypeError(f"{type(x).__name__} at top level or inside a container")
    return root[0]


def write_reply(obj):
    if os.getpid() != MAIN_PID:  # a forked copy of the worker must never answer
        os._exit(0)
    problem = None
    if "result" in obj:
        try:
            obj["result"] = plain(obj["result"])
            problem = protocol_problem(obj["result"])
        except Exception as e:  # noqa: BLE001 - env-defined containers may raise anything
            problem = f"a value that is not JSON-serialisable: {e}"
    else:
        obj["detail"] = str(obj.get("detail", "")).encode("utf-8", "replace").decode()
    if problem is None:
        try:
            data = json.dumps(obj, allow_nan=True).encode() + b"\n"
        except (TypeError, ValueError, RecursionError) as e:
            problem = f"a value that is not JSON-serialisable: {e}"
    if problem is not None:
        data = (
            json.dumps(
                {
                    "id": obj.get("id"),
                    "ok": False,
                    "reason": "bad_" + obj.get("op", "step"),
                    "detail": f"{obj.get('op', 'step')}() returned {problem}"[:2000],
                    "fatal": False,
                }
            ).encode()
            + b"\n"
        )
    cap = SETTINGS["limits"]["reply_bytes"]
    if len(data) > cap:
        data = (
            json.dumps(
                {
                    "id": obj.get("id"),
                    "ok": False,
                    "reason": "flood",
                    "detail": f"reply of {len(data)} bytes exceeds the {cap}-byte cap",
                    "fatal": True,
                }
            ).encode()
            + b"\n"
        )
    view = memoryview(data)
    while view:
        n = os.write(PROTO, view)
        view = view[n:]


_RESOURCE_ERRNOS = {
    errno.EAGAIN: "processes",
    errno.EMFILE: "open files",
    errno.ENFILE: "open files",
    errno.ENOSPC: "disk space (/tmp or /dev/shm full)",
    errno.EFBIG: "file size",
    errno.EDQUOT: "disk quota",
}


def classify(exc, default):
    """Map an exception raised by environment code to (reason, fatal)."""
    seen = set()
    e = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, MemoryError) or (isinstance(e, OSError) and e.errno == errno.ENOMEM):
            return "memory", True, None
        if isinstance(e, OSError) and e.errno in _RESOURCE_ERRNOS:
            return "limit", True, _RESOURCE_ERRNOS[e.errno]
        if isinstance(e, RuntimeError) and "can't start new thread" in str(e):
            return "limit", True, "processes"
        e = e.__cause__ or e.__context__
    return default, False, None


def error_reply(rid, exc, default, where):
    reason, fatal, what = classify(exc, default)
    tb = traceback.extract_tb(exc.__traceback__)
    frames = [f for f in tb if f.filename == "<env>"]
    line = f" (line {frames[-1].lineno})" if frames else ""
    detail = f"{where}{line}: {type(exc).__name__}: {exc}"
    if what:
        detail = f"{what} limit: {detail}"
    return {"id": rid, "ok": False, "reason": reason, "detail": detail[:2000], "fatal": fatal}


def find_env_class(module):
    import gymnasium

    found = [
        v
        for v in vars(module).values()
        if isinstance(v, type)
        and issubclass(v, gymnasium.Env)
        and v is not gymnasium.Env
        and v.__module__ == module.__name__
    ]
    # A base class and its subclass both defined here: the leaf is the environment.
    leaves = [c for c in found if not any(o is not c and issubclass(o, c) for o in found)]
    if len(leaves) == 1:
        return leaves[0], None
    if not leaves:
        return None, "the module defines no gymnasium.Env subclass"
    return None, "the module defines several gymnasium.Env subclasses: " + ", ".join(
        sorted(c.__name__ for c in leaves)
    )


def sibling(name):
    """The module `name`.py beside this file (the spade_cli package is not visible in
    the sandbox)."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(f"spade_{name}", os.path.join(here, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def published_module():
    """The published contract's loader (published.py, beside us), fresh for each load:
    nothing an environment changed in it carries over to the re-executed module."""
    return sibling("published")


def load(code):
    module = types.ModuleType("spade_env")
    module.__file__ = "<env>"
    sys.modules["spade_env"] = module
    try:
        compiled = compile(code, "<env>", "exec")
    except SyntaxError as e:
        return None, {
            "ok": False,
            "reason": "syntax_error",
            "fatal": False,
            "detail": f"line {e.lineno}: {e.msg}",
        }
    except (ValueError, MemoryError, RecursionError) as e:
        return None, error_reply(None, e, "syntax_error", "compiling the module")
    published = published_module()
    if published.detect_contract(code) == "published":  # the names their loader injects
        published.prefill(module.__dict__)
    try:
        exec(compiled, module.__dict__)
    except BaseException as e:  # noqa: BLE001 - SystemExit too: untrusted code may call exit()
        return None, error_reply(None, e, "import_crash", "importing the module")
    cls, problem = find_env_class(module)
    if cls is None and problem.endswith("no gymnasium.Env subclass"):
        cls, problem = published.adapt(module)
    if cls is None:
        return None, {"ok": False, "reason": "no_env_class", "detail": problem, "fatal": False}
    return cls, None


def instantiate(cls):
    try:
        return cls(), None
    except BaseException as e:  # noqa: BLE001
        return None, error_reply(None, e, "import_crash", f"constructing {cls.__name__}()")


def describe(cls):
    meta = getattr(cls, "metadata", None)
    try:
        meta = plain(meta)
        problem = protocol_problem(meta)
    except (TypeError, ValueError, RecursionError) as e:
        problem = str(e)
    if problem is not None:
        meta = {"__unserialisable__": f"metadata: {problem}"}
    return {"class": cls.__name__, "metadata": meta}


def serve(code):
    cls, err = load(code)
    if err is None:
        env, err = instantiate(cls)
    if err is not None:
        write_reply({**err, "id": 0})
        return
    write_reply({"id": 0, "ok": True, "result": describe(cls)})
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return
        req = json.loads(line)
        rid, op = req.get("id"), req.get("op")
        t0 = time.perf_counter()
        try:
            if op == "step":
                out = env.step(req.get("action"))
                if not (isinstance(out, tuple) and len(out) == 5):
                    raise TypeError(
                        f"step() must return a 5-tuple, got {type(out).__name__}"
                        + (f" of length {len(out)}" if isinstance(out, tuple) else "")
                    )
            elif op == "reset":
                out = env.reset(seed=req.get("seed"), options=req.get("options"))
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise TypeError("reset() must return (observation, info)")
            elif op == "new":
                if req.get("reload"):
                    cls, err = load(code)
                    if err is not None:
                        write_reply({**err, "id": rid})
                        continue
                env, err = instantiate(cls)
                if err is not None:
                    write_reply({**err, "id": rid})
                    continue
                out = describe(cls)
            elif op == "meta":
                out = describe(cls)
            else:
                write_reply(
                    {
                        "id": rid,
                        "ok": False,
                        "reason": "protocol",
                        "detail": f"unknown op {op!r}",
                        "fatal": True,
                    }
                )
                continue
        except BaseException as e:  # noqa: BLE001
            default = "bad_step" if op == "step" else "bad_reset"
            write_reply({**error_reply(rid, e, default, f"{op}()"), "op": op})
            continue
        write_reply(
            {
                "id": rid,
                "op": op,
                "ok": True,
                "result": out,
                "t": round(time.perf_counter() - t0, 6),
            }
        )


def run_worker(settings):
    """Steps 1-5 of the module docstring; returns when the parent closes stdin."""
    global SETTINGS, MAIN_PID, PROTO
    SETTINGS, MAIN_PID = settings, os.getpid()
    lim = settings["limits"]
    jail = JAIL or sibling("jail")
    if settings.get("uid") is not None:
        jail.drop_privileges(settings["uid"])
    # The protocol channel moves to a private descriptor; whatever the environment
    # prints (fd 1 or fd 2) goes to the parent's bounded stderr sink instead.
    PROTO = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    jail.set_limits(lim)
    if settings.get("seccomp"):  # None only where the user accepted running without one
        jail.install_filter(bytes.fromhex(settings["seccomp"]))
    os.chdir("/tmp")
    import gymnasium  # noqa: F401 - preloaded so every environment finds it cheaply
    import numpy  # noqa: F401

    jail.set_memory_limit(lim)
    write_reply({"id": -1, "ok": True, "result": "ready"})
    first = sys.stdin.buffer.readline()
    if not first:
        return
    serve(json.loads(first)["code"])


# -- the fork server -----------------------------------------------------------------
#
# Started instead of a worker (settings {"zygote": {"fd": N}}), as root inside bwrap with
# CAP_SYS_ADMIN besides the capabilities a worker needs to drop privileges. It never runs
# untrusted code: it imports gymnasium and numpy once, then, for each request on its
# control socket (fd N: JSON worker settings + 4 descriptors), forks a worker into a
# fresh sandbox inside its own, ready in milliseconds instead of a Python start:
#
#   zygote: unshare a pid namespace for its next child, fork G, restore its own, and
#           send the parent a pidfd of G (opened with SIGCHLD blocked, so G is still
#           ours, unreaped, whatever happens: no pid-reuse race)
#   G, pid 1 there: unshare mount, network, IPC and UTS namespaces; mount a fresh
#           read-only /proc (this namespace's processes only) and fresh sized tmpfs
#           /tmp and /dev/shm; fork W; reap; when W ends, write its exit code to the
#           status descriptor and exit, which kills whatever W left behind
#   W: the worker (run_worker: its own host uid, no capabilities, limits, seccomp)
#
# Workers forked this way share nothing writable, no processes, no network and no IPC,
# as with one bwrap each. The parent kills one through the pidfd of its G.

_NEWNS, _NEWCGROUP, _NEWUTS, _NEWIPC, _NEWPID, _NEWNET = (
    0x00020000,
    0x02000000,
    0x04000000,
    0x08000000,
    0x20000000,
    0x40000000,
)
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 1, 2, 4, 8, 0x4000, 1 << 18


def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_ulong,
        ctypes.c_char_p,
    ]

    def call(name, *args):
        if getattr(libc, name)(*args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{name}: {os.strerror(err)}")

    return call


def _mount_proc(call):
    """A /proc of this pid namespace's processes and nothing else: the machine-wide files
    (loadavg, stat, meminfo, sys/fs/file-nr, pressure, ...) are counters every worker
    moves and every worker could read, a channel between them (`subset=pid`, Linux 5.8+;
    older kernels get the full /proc)."""
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_RDONLY
    try:
        call("mount", b"proc", b"/proc", b"proc", flags, b"subset=pid")
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
        call("mount", b"proc", b"/proc", b"proc", flags, None)


def _close_fds_except(keep):
    # Up to the highest open descriptor: without close_range(2) (Linux < 5.9),
    # closerange closes every number up to its bound one by one.
    top = max(int(fd) for fd in os.listdir("/proc/self/fd")) + 1
    lo = 3
    for fd in sorted(f for f in keep if f >= 3):
        os.closerange(lo, fd)
        lo = fd + 1
    os.closerange(lo, max(lo, top))


def _episode_init(settings, fds):
    """G: pid 1 of a worker's namespaces. Trusted code only; never returns."""
    stdin_r, proto_w, err_w, status_w = fds[:4]
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # not the zygote's reaper, nor its mask
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
    try:
        _close_fds_except(fds)
        if len(fds) == 5:  # join the worker's memory cgroup before anything else runs
            os.write(fds[4], b"0")
            os.close(fds[4])
            fds = fds[:4]
        call = _libc()
        # A cgroup namespace rooted at the worker's own cgroup: /proc/self/cgroup shows "/".
        call("unshare", _NEWNS | _NEWNET | _NEWIPC | _NEWUTS | _NEWCGROUP)
        call("mount", None, b"/", None, _MS_REC | _MS_PRIVATE, None)
        _mount_proc(call)
        for path, mb in ((b"/tmp", settings["tmp_mb"]), (b"/dev/shm", settings["shm_mb"])):
            # nr_inodes: empty files and directories cost kernel memory the size ignores.
            call(
                "mount",
                b"tmpfs",
                path,
                b"tmpfs",
                _MS_NOSUID | _MS_NODEV,
                b"size=%dm,nr_inodes=%d,mode=1777" % (mb, settings.get("inodes", 4096)),
            )
        # The zygote's /dev/pts is every worker's: a pty one opens, the others would see.
        call(
            "mount",
            b"tmpfs",
            b"/dev/pts",
            b"tmpfs",
            _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_RDONLY,
            b"size=4k,nr_inodes=1,mode=0555",
        )
        worker = os.fork()
    except BaseException as e:  # noqa: BLE001 - the parent reads it as the worker's death
        os.write(err_w, f"the worker's sandbox failed: {type(e).__name__}: {e}\n".encode())
        os.write(status_w, b"1\n")
        os._exit(1)
    if worker == 0:
        try:
            for src, dst in ((stdin_r, 0), (proto_w, 1), (err_w, 2)):
                os.dup2(src, dst)
            _close_fds_except(())
            import numpy.random

            numpy.random.seed()  # the fork copied the zygote's global generator: reseed
            run_worker(settings)
        except BaseException:  # noqa: BLE001 - reported as the exit code
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    for fd in (stdin_r, proto_w, err_w):
        os.close(fd)
    while True:  # pid 1 reaps every orphan of its namespace
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        if pid == worker:
            try:
                os.write(status_w, b"%d\n" % os.waitstatus_to_exitcode(status))
            finally:
                os._exit(0)


def _reap(_signum, _frame):
    """The zygote's SIGCHLD handler: collect every G that has ended."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def zygote(control_fd):
    global JAIL
    import resource  # noqa: F401 - what run_worker imports, imported once for every worker
    import socket

    import gymnasium  # noqa: F401 - imported once, shared by every worker forked from here
    import numpy  # noqa: F401

    JAIL = sibling("jail")

    os.chdir("/")
    signal.signal(signal.SIGCHLD, _reap)
    call = _libc()
    own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    control = socket.socket(fileno=control_fd)
    control.send(b'{"ok": true, "result": "ready"}')
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(control, 1 << 16, 5)
        except OSError:
            return
        if not msg:
            return  # the parent closed its end
        try:
            if len(fds) not in (4, 5):
                raise OSError(errno.EINVAL, f"expected 4 or 5 descriptors, got {len(fds)}")
            settings = json.loads(msg)
            call("unshare", _NEWPID)  # for the next child only
            init = -1
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
            try:
                try:
                    init = os.fork()
                finally:
                    if init != 0:
                        call("setns", own_pid_ns, _NEWPID)
                if init == 0:
                    _episode_init(settings, fds)
                pidfd = os.pidfd_open(init)
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        except (OSError, ValueError) as e:
            control.send(json.dumps({"ok": False, "detail": str(e)}).encode())
        else:
            socket.send_fds(control, [b'{"ok": true}'], [pidfd])
            os.close(pidfd)
        finally:
            for fd in fds:
                os.close(fd)


def main():
    global SETTINGS
    SETTINGS = json.loads(sys.argv[1])
    if SETTINGS.get("zygote"):
        zygote(SETTINGS["zygote"]["fd"])
    else:
        run_worker(SETTINGS)


if __name__ == "__main__":
    main()
