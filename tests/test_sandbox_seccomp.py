"""The seccomp filter: one declared rule list, compiled by libseccomp for each
architecture. Each exported program is run here, instruction by instruction, on the
system calls every rule names (and on their allowed neighbours): the program must do
what the rule says on x86_64 and on aarch64 alike, whichever machine builds it."""

from __future__ import annotations

import errno
import struct

import pytest

from spade_cli.errors import ResourceError
from spade_cli.sandbox import EnvSession, SandboxConfig, seccomp
from spade_cli.sandbox.seccomp import ARCHES, RULES, compile_filter, syscall_number

ALLOW, KILL_PROCESS, ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


def run_bpf(program: bytes, nr: int, arch: int, args=(0,) * 6) -> int:
    """What a classic-BPF seccomp program returns for one call (struct seccomp_data:
    nr, arch, instruction pointer, six 64-bit arguments; little-endian on both)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    insns = [struct.unpack_from("<HBBI", program, i) for i in range(0, len(program), 8)]
    a = x = pc = 0
    mem = [0] * 16
    while True:
        code, jt, jf, k = insns[pc]
        pc += 1
        cls = code & 0x07
        if code == 0x20:  # ld [k]
            a = struct.unpack_from("<I", data, k)[0]
        elif code == 0x00:  # ld #k
            a = k
        elif code == 0x60:  # ld M[k]
            a = mem[k]
        elif code == 0x02:  # st M[k]
            mem[k] = a
        elif code == 0x01:  # ldx #k
            x = k
        elif code == 0x07:  # tax
            x = a
        elif code == 0x87:  # txa
            a = x
        elif code == 0x54:  # and #k
            a &= k
        elif code == 0x05:  # ja
            pc += k
        elif cls == 0x05:  # conditional jumps on k (0x_5) or x (0x_d)
            v = x if code & 0x08 else k
            op = code & 0xF0
            hit = {0x10: a == v, 0x20: a > v, 0x30: a >= v, 0x40: bool(a & v)}[op]
            pc += jt if hit else jf
        elif code == 0x06:  # ret #k
            return k
        elif code == 0x16:  # ret a
            return a
        else:
            raise AssertionError(f"unexpected BPF instruction {code:#x} at {pc - 1}")


def args_for(rule: seccomp.Rule, garbage: int = 0) -> list[int]:
    """Arguments meeting the rule's conditions, with `garbage` in the bits it ignores."""
    args = [garbage] * 6
    for arg, mask, value in rule.when:
        args[arg] = (garbage & ~mask & (2**64 - 1)) | value
    return args


@pytest.fixture(scope="module", params=ARCHES)
def arch(request):
    return request.param


@pytest.fixture(scope="module")
def program(arch):
    return compile_filter(arch)


def test_every_rule_is_in_the_program(arch, program):
    checked = 0
    for rule in RULES:
        nr = syscall_number(arch, rule.syscall)
        if nr is None:
            assert rule.syscall in ("modify_ldt", "inotify_init") and arch == "aarch64", rule
            continue
        for garbage in (0, 0xFFFF_FFFF_0000_0000):
            got = run_bpf(program, nr, AUDIT_ARCH[arch], args_for(rule, garbage))
            assert got == ERRNO | rule.errno, (rule, hex(got))
        checked += 1
    assert checked >= len(RULES) - 2


@pytest.mark.parametrize(
    "name, args",
    [
        ("read", ()),
        ("openat", ()),
        ("mmap", ()),
        ("clone", (0x11,)),  # fork: SIGCHLD | ...
        ("unshare", (0x400,)),  # CLONE_FILES: not a namespace
        ("socket", (2, 1, 0)),
        ("socket", (10, 2, 0)),
        ("socket", (1, 1, 0)),
        ("socket", (16, 3, 0)),  # NETLINK_ROUTE
        ("socketpair", (1, 1, 0)),
        ("fcntl", (3, 1)),
        ("fcntl", (3, 4)),  # F_GETFD, F_SETFL
        ("preadv2", (3, 0, 1, 0, 0, 0x1)),  # RWF_HIPRI: not RWF_NOWAIT
    ],
)
def test_what_the_rules_leave_alone_is_allowed(arch, program, name, args):
    assert run_bpf(program, syscall_number(arch, name), AUDIT_ARCH[arch], args) == ALLOW


def test_the_page_cache_rules(arch, program):
    preadv2 = syscall_number(arch, "preadv2")
    nowait = run_bpf(program, preadv2, AUDIT_ARCH[arch], (3, 0, 1, 0, 0, 0x9))
    assert nowait == ERRNO | errno.EOPNOTSUPP
    for name in ("mincore", "cachestat"):
        assert run_bpf(program, syscall_number(arch, name), AUDIT_ARCH[arch]) == ERRNO | errno.EPERM


def test_other_architectures_and_abis_are_killed(arch, program):
    other = AUDIT_ARCH["aarch64" if arch == "x86_64" else "x86_64"]
    assert run_bpf(program, 0, other) == KILL_PROCESS
    assert run_bpf(program, 0, 0x40000003) == KILL_PROCESS  # i386
    if arch == "x86_64":  # x32: the x86_64 arch token with bit 30 set in the number
        assert run_bpf(program, 0x40000000 | 165, AUDIT_ARCH[arch]) == KILL_PROCESS


def test_without_a_filter_the_sandbox_refuses_unless_told(monkeypatch):
    from spade_cli.sandbox import session

    monkeypatch.setattr(session, "host_filter", lambda: (None, "libseccomp is not installed"))
    code = (
        "import gymnasium as gym\nclass E(gym.Env):\n"
        "    metadata = {'name': 'e', 'max_turns': 1}\n"
        "    def reset(self, seed=None, options=None):\n        return 'o', {}\n"
    )
    with pytest.raises(
        ResourceError,
        match="no seccomp filter can be installed here: libseccomp "
        "is not installed; or pass --unsafe-no-seccomp",
    ):
        EnvSession(code, SandboxConfig())
    with EnvSession(code, SandboxConfig(allow_no_filter=True)) as s:
        assert s.reset() == ("o", {})
        assert s.filtered is False


def test_records_say_when_workers_ran_without_a_filter(monkeypatch):
    from spade_cli.envs import validation
    from spade_cli.envs.checks import Verdict

    verdict = Verdict(False, "no_code", "", 0.0, [1])
    assert "seccomp" not in validation.apply_verdict({"id": "a"}, verdict, None)["validation"]
    monkeypatch.setattr(validation, "host_filter", lambda: (None, "libseccomp is not installed"))
    assert validation.apply_verdict({"id": "a"}, verdict, None)["validation"]["seccomp"] is False
