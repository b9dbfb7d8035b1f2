"""Sandbox limits, reason codes, and the bwrap command line that builds the jail."""

from __future__ import annotations

import importlib.metadata as md
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from ..errors import ResourceError

# Reason codes an EnvSession call can fail with (a subset of records.REASONS).
REASONS = (
    "timeout",  # wall time per call / per episode, or CPU time, ran out
    "memory",  # address-space limit hit (MemoryError, ENOMEM, mmap refused)
    "limit",  # another limit hit: processes, open files, file size, /tmp or /dev/shm
    "crash",  # the worker died (signal, exit, segfault) or could not start
    "flood",  # a reply or the environment's output exceeded its cap
    "protocol",  # the worker answered something that is not a well-formed reply
    "syntax_error",  # the module does not compile
    "import_crash",  # executing the module or constructing the Env raised
    "no_env_class",  # no (or more than one) gymnasium.Env subclass in the module
    "bad_reset",  # reset() raised or returned something malformed
    "bad_step",  # step() raised or returned something malformed
)

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
)

# No user site, no script directory on sys.path, no .pyc writes. Not -I/-E: the worker's
# environment is entirely ours, and PYTHONHASHSEED=0 in it must apply so that set and
# dict-of-set iteration orders (and so episodes) agree between workers.
PY_FLAGS = ("-s", "-P", "-B")

# Where things appear inside the jail.
PY_ROOT = "/opt/python"
WORKER_PATH = "/opt/spade/worker.py"
SITE = "/opt/site"  # the allowed distributions (on PYTHONPATH inside)
MICRO_SITE = Path(__file__).resolve().parents[1] / "micro" / "site"


class EnvError(Exception):
    """An environment failed inside the sandbox; `reason` is one of REASONS."""

    def __init__(self, reason: str, detail: str = "", fatal: bool = True):
        assert reason in REASONS, reason
        self.reason, self.detail, self.fatal = reason, detail, fatal
        super().__init__(f"{reason}: {detail}" if detail else reason)

    def __reduce__(self):  # picklable across processes despite the custom signature
        return (EnvError, (self.reason, self.detail, self.fatal))


@dataclass
class SandboxConfig:
    """Limits of one sandboxed environment worker. Sizes in MiB, times in seconds."""

    unsafe: bool = False
    """Run without bwrap (rlimits only). Only with an explicit user opt-in; warns loudly."""
    call_timeout: float = 5.0
    """Wall time for one reset/step/instantiate call."""
    episode_timeout: float = 60.0
    """Wall time from a reset() to the end of that episode's last step()."""
    start_timeout: float = 30.0
    """Wall time to start the worker and preload gymnasium (slow when 100+ start at once)."""
    cpu_seconds: int = 60
    """CPU time of the worker over its whole life (RLIMIT_CPU)."""
    memory_mb: int = 512
    """Address space of the worker (RLIMIT_AS). Python + numpy + gymnasium already take
    ~115 MiB of it, so the environment itself gets about memory_mb - 115."""
    nproc: int = 32
    """Processes plus threads of the worker's uid (RLIMIT_NPROC; enforced in bwrap mode only)."""
    file_mb: int = 8
    """Largest file the worker may write (RLIMIT_FSIZE)."""
    open_files: int = 64
    """Open file descriptors (RLIMIT_NOFILE)."""
    tmp_mb: int = 16
    """Size of the private writable /tmp (tmpfs)."""
    shm_mb: int = 4
    """Size of /dev/shm (tmpfs); the rest of /dev is read-only."""
    reply_bytes: int = 1 << 20
    """Largest reply line (one observation + info, JSON)."""
    output_bytes: int = 1 << 20
    """Most bytes the environment may print (stdout + stderr) during one call."""
    episode_mb: int = 32
    """Most the parent holds of one episode: the decoded size (Python objects) of every
    reply from a reset() to the next (observations, info). Checked as each reply is read;
    past it the session fails `flood`."""
    session_mb: int = 128
    """Most the parent holds of one worker over its whole life (metadata and tool specs,
    every episode's replies): one candidate's checks in spade-validate. `flood` past it."""
    fork: bool = True
    """Fork workers from one preloaded sandboxed Python (ForkServer: milliseconds per worker)
    where that applies (root, Linux >= 5.3); else, or when False, each worker starts its
    own bwrap and Python (~0.1 s of CPU). SPADE_SANDBOX_FORK=0 turns it off everywhere."""
    cgroup: bool = True
    """As root, where the kernel offers a memory cgroup: each worker and everything it
    starts share one limit of memory_mb + tmp_mb + shm_mb MiB (heap, children, tmpfs
    pages, pipes, kernel memory). SPADE_SANDBOX_CGROUP=0 turns it off everywhere."""
    allow_no_filter: bool = False
    """Where no seccomp filter can be built (no libseccomp.so.2, an architecture it does
    not know), run workers without one instead of refusing to start. Every record a
    worker without a filter produced says so (`seccomp: false`)."""
    packages: tuple[str, ...] = ()
    """Distributions visible inside besides gymnasium and its dependencies."""
    extra_env: dict = field(default_factory=dict)
    """Environment variables set inside (the environment is otherwise empty)."""

    @property
    def cgroup_mb(self) -> int:
        """The one memory bound of a worker and its children, tmpfs included."""
        return self.memory_mb + self.tmp_mb + self.shm_mb

    def limits(self) -> dict:
        d = asdict(self)
        return {
            k: d[k]
            for k in ("cpu_seconds", "memory_mb", "nproc", "file_mb", "open_files", "reply_bytes")
        }


def require_sandbox(unsafe: bool) -> None:
    """Call at the start of a command that runs designer code: fails fast (exit code 4,
    with the install hint) when bwrap is missing, or warns loudly when unsafe."""
    if unsafe:
        from .notices import warn_unsafe

        warn_unsafe()
    else:
        check_sandbox()


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


_checked: dict[str, str] = {}
_check_lock = threading.Lock()


def check_sandbox() -> str:
    """Path of a bwrap that works here, or ResourceError with the install hint."""
    path = bwrap_path()
    if path is None:
        raise ResourceError(
            f"bwrap not found on PATH: the sandbox needs it; {INSTALL_HINT}; "
            "or pass --unsafe-no-sandbox to run designer code unconfined"
        )
    with _check_lock:
        if path in _checked:
            return path
        if os.geteuid() != 0:
            bad = unreadable_binds()
            if bad:
                raise ResourceError(
                    f"the sandbox must bind {bad[0]} into the jail, but this user cannot read it "
                    f"({len(bad)} such path{'s' if len(bad) > 1 else ''}; a parent directory such as a "
                    "0700 home hides it): use a Python installed where every user can read it "
                    "(e.g. /usr or /opt), or run as root"
                )
        try:
            probe = subprocess.run(
                bwrap_argv(path, None, SandboxConfig())
                + [f"{PY_ROOT}/bin/python", "-I", "-S", "-c", "pass"],
                env={},
                capture_output=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ResourceError(f"bwrap at {path} does not run: {e}") from None
        if probe.returncode != 0:
            msg = probe.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            raise ResourceError(
                f"bwrap at {path} cannot build the sandbox here: {msg[0]} "
                "(bwrap needs root, or unprivileged user namespaces)"
            )
        _checked[path] = path
    return path


def unreadable_binds(packages: tuple[str, ...] = ()) -> list[str]:
    """Host paths the jail binds that this process's (real) user cannot read: bwrap,
    running as that user, would fail on each. Empty when the sandbox can be built."""
    lay = python_layout(tuple(packages))
    paths = [
        lay.executable,
        lay.stdlib,
        str(Path(__file__).with_name("worker.py")),
        str(Path(__file__).with_name("jail.py")),
    ]
    paths += [host for host, _name in lay.site_binds]
    if lay.libdir:
        try:
            paths += [
                os.path.join(lay.libdir, n)
                for n in os.listdir(lay.libdir)
                if n.startswith("libpython") and ".so" in n
            ]
        except OSError:
            paths.append(lay.libdir)
    bad = []
    for p in paths:
        mode = os.R_OK | (os.X_OK if os.path.isdir(p) else 0)
        if not os.access(p, mode):
            bad.append(p)
    return bad


@dataclass(frozen=True)
class PythonLayout:
    """Host paths of the interpreter and the packages the jail exposes."""

    executable: str
    stdlib: str
    libdir: str | None  # where a shared libpython lives, unless /usr/lib shows it anyway
    site_binds: tuple[tuple[str, str], ...]  # (host path, name under SITE)
    hidden: tuple[str, ...]  # package directories inside the stdlib directory to cover


def _requirements(dist: md.Distribution) -> list[str]:
    out = []
    for req in dist.requires or []:
        if "extra ==" in req:
            continue
        name = req.split(";")[0].strip()
        for sep in "<>=!~[ (":
            name = name.split(sep)[0]
        out.append(name)
    return out


# Besides gymnasium, what the release's environments import: its game template checks
# answers with math_verify (`from math_verify import parse, verify`). Skipped when absent
# (a project dependency, so only a hand-made install lacks it).
RELEASE_PACKAGES = ("math-verify",)


@lru_cache(maxsize=8)
def python_layout(packages: tuple[str, ...] = ()) -> PythonLayout:
    """Collect gymnasium, RELEASE_PACKAGES, `packages` and their (non-extra) dependencies,
    so the jail holds only those distributions rather than the whole site-packages."""
    todo, seen, binds = ["gymnasium", *RELEASE_PACKAGES, *packages], set(), {}
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            if name in ("gymnasium", *packages):
                raise ResourceError(
                    f"package {name!r} is not installed; the sandbox needs it"
                ) from None
            continue
        base = Path(dist.locate_file(""))
        for f in dist.files or []:
            parts = Path(str(f)).parts
            if not parts or parts[0] == "..":
                continue
            top = parts[0] if parts[0] != "__pycache__" else str(Path(*parts[:2]))
            if (base / top).exists():
                binds[top] = str(base / top)
        todo.extend(_requirements(dist))
    exe = Path(sys.executable).resolve()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    libdir = None
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir = sysconfig.get_config_var("LIBDIR") or str(Path(sys.base_prefix) / "lib")
        if any(
            libdir == d or libdir.startswith(d + "/")
            for d in ("/usr/lib", "/lib", "/usr/lib64", "/lib64")
        ):
            libdir = None  # a system Python's libpython is visible with the shared libraries
    # pyenv/python.org builds keep site-packages inside the stdlib directory: cover it.
    hidden = tuple(n for n in ("site-packages", "dist-packages") if (stdlib / n).is_dir())
    return PythonLayout(
        str(exe), str(stdlib), libdir, tuple(sorted((v, k) for k, v in binds.items())), hidden
    )


def _ro_system_binds() -> list[str]:
    """Shared libraries only: /usr/lib (libc, libssl, libffi...), not /usr/bin or /etc."""
    # bwrap creates missing parent directories 0700: pre-create them world-readable.
    args = ["--perms", "0755", "--dir", "/usr", "--perms", "0755", "--dir", "/etc"]
    for d in ("/usr/lib", "/usr/lib64", "/usr/lib32"):
        if os.path.isdir(d) and not os.path.islink(d):
            args += ["--ro-bind", d, d]
    for d in ("/lib", "/lib64", "/lib32"):
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    if os.path.exists("/etc/ld.so.cache"):
        args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    return args


@lru_cache(maxsize=1)
def _proc_masks() -> tuple[str, ...]:
    """bwrap cannot mount /proc with `subset=pid` (what forked workers get): cover each
    machine-wide entry instead (files with an empty one, directories with an empty
    tmpfs), so that no counter another worker moves (load, process and open-file counts,
    free memory, pressure) can be read. Per-process entries and the symlinks into them
    (self, mounts, net) stay."""
    masks = []
    for name in sorted(os.listdir("/proc")):
        path = f"/proc/{name}"
        if name.isdigit() or os.path.islink(path):
            continue
        if os.path.isdir(path):
            masks += ["--size", "4096", "--perms", "0555", "--tmpfs", path]
        else:
            masks += ["--ro-bind", "/dev/null", path]
    return tuple(masks)


def jail_env(cfg: SandboxConfig, layout: PythonLayout | None) -> dict:
    """The complete environment of the worker: nothing from the host."""
    env = {
        "PATH": f"{PY_ROOT}/bin" if layout else "/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",  # same seed, same episode, even for set iteration order
        # One thread each: BLAS thread pools would eat RLIMIT_NPROC and address space.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    if layout:
        # Only the allowed distributions, whatever this Python's site.py believes in
        # (Debian's looks for dist-packages, pyenv's for site-packages).
        env["PYTHONPATH"] = SITE
    else:
        env["PYTHONPATH"] = str(MICRO_SITE)  # unconfined: the micro world's module alone
    if layout and layout.libdir:
        # The interpreter's RUNPATH names its host prefix, which does not exist inside.
        env["LD_LIBRARY_PATH"] = f"{PY_ROOT}/lib"
    env.update({str(k): str(v) for k, v in cfg.extra_env.items()})
    return env


def bwrap_argv(
    bwrap: str, uid: int | None, cfg: SandboxConfig, extra_caps: tuple[str, ...] = ()
) -> list[str]:
    """The bwrap command line up to (not including) the command it runs. `extra_caps`
    (root mode) are kept besides those a worker needs to switch uid and drop the rest."""
    lay = python_layout(tuple(cfg.packages))
    pyver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    a = [
        bwrap,
        # Namespaces: no network, own pids/ipc/hostname/cgroup view. No user namespace
        # when we are root: the worker must become a real non-root host uid (below).
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        "--clearenv",
    ]
    if uid is None:
        if os.geteuid() != 0:
            a += ["--unshare-user", "--uid", "65534", "--gid", "65534"]
    else:
        # bwrap as root keeps every capability for the child by default; keep only what
        # the worker needs to switch to `uid` and empty its bounding set, then drops.
        a += [
            "--cap-drop",
            "ALL",
            "--cap-add",
            "CAP_SETUID",
            "--cap-add",
            "CAP_SETGID",
            "--cap-add",
            "CAP_SETPCAP",
        ]
        for cap in extra_caps:
            a += ["--cap-add", cap]
    for k, v in jail_env(cfg, lay).items():
        a += ["--setenv", k, v]
    a += _ro_system_binds()
    a += [
        "--perms",
        "0755",
        "--dir",
        "/opt",
        "--perms",
        "0755",
        "--dir",
        f"{PY_ROOT}/bin",
        "--ro-bind",
        lay.executable,
        f"{PY_ROOT}/bin/{pyver}",
        "--symlink",
        pyver,
        f"{PY_ROOT}/bin/python",
        "--perms",
        "0755",
        "--dir",
        f"{PY_ROOT}/lib",
    ]
    if lay.libdir:
        for name in os.listdir(lay.libdir):
            if name.startswith("libpython") and ".so" in name:
                a += ["--ro-bind", os.path.join(lay.libdir, name), f"{PY_ROOT}/lib/{name}"]
    # The stdlib, with its own site-packages (torch, transformers, ...) covered, and the
    # allowed distributions alone in SITE.
    a += ["--ro-bind", lay.stdlib, f"{PY_ROOT}/lib/{pyver}"]
    for name in lay.hidden:
        a += ["--size", "4096", "--perms", "0555", "--tmpfs", f"{PY_ROOT}/lib/{pyver}/{name}"]
    a += ["--perms", "0755", "--tmpfs", SITE]
    for host, name in lay.site_binds:
        a += ["--ro-bind", host, f"{SITE}/{name}"]
    # The micro world's families, which designs of the micro world import (`spade_micro`).
    a += ["--ro-bind", str(MICRO_SITE / "spade_micro.py"), f"{SITE}/spade_micro.py"]
    a += [
        "--remount-ro",
        SITE,
        "--perms",
        "0755",
        "--dir",
        "/opt/spade",
        "--ro-bind",
        str(Path(__file__).with_name("worker.py")),
        WORKER_PATH,
        "--ro-bind",
        str(Path(__file__).with_name("jail.py")),
        "/opt/spade/jail.py",
        "--ro-bind",
        str(Path(__file__).with_name("published.py")),
        "/opt/spade/published.py",
        "--proc",
        "/proc",
        *_proc_masks(),
        # bwrap's /proc leaves the host's /proc/sys writable to root: remount read-only.
        "--remount-ro",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(cfg.shm_mb << 20),
        "--perms",
        "1777",
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
        "--size",
        str(cfg.tmp_mb << 20),
        "--perms",
        "1777",
        "--tmpfs",
        "/tmp",
        "--chdir",
        "/tmp",
        "--remount-ro",
        "/",
    ]
    return a
