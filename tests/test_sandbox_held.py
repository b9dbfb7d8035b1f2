"""What the parent holds of an environment is bounded while it reads the worker's replies
(`SandboxConfig.episode_mb`, `session_mb`), whatever the environment prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spade_cli.sandbox import EnvError, EnvSession, SandboxConfig

pytestmark = pytest.mark.skipif(
    os.system("command -v bwrap >/dev/null"), reason="bwrap not installed"
)

# Observations just under the per-reply cap (1 MiB), at every step of a long episode:
# each reply passes every per-reply check, and kept (as validation keeps its episodes)
# they would add up to gigabytes.
VERBOSE = textwrap.dedent("""
    import gymnasium as gym

    class Verbose(gym.Env):
        metadata = {"name": "verbose", "max_turns": 400}

        def reset(self, seed=None, options=None):
            self.t = 0
            return "x" * 1_000_000, {"solution": [str(t) for t in range(400)]}

        def step(self, action):  # right (the step number) or over
            right = action == str(self.t)
            self.t += 1
            obs = chr(97 + self.t % 26) * 1_000_000
            return obs, 0.0025 if right else 0.0, self.t >= 400 or not right, False, {}
""")

SMALL = VERBOSE.replace("1_000_000", "100")

# The validator's own peak RSS (not its workers'), as spade-validate runs it.
MEASURED = (
    "import resource, sys\n"
    "from spade_cli.__main__ import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    "    print('maxrss_kib', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,"
    " file=sys.stderr)\n"
)


def validate_peak_mib(tmp_path: Path, code: str) -> tuple[float, dict]:
    rec = {
        "kind": "candidate",
        "v": 1,
        "id": "verbose",
        "parents": [],
        "round": 0,
        "origin": "library",
        "env": {"code": code},
    }
    src = tmp_path / "cand.jsonl"
    src.write_text(json.dumps(rec) + "\n")
    r = subprocess.run(
        [sys.executable, "-c", MEASURED, "validate", str(src), "--seeds", "1", "--workers", "1"],
        capture_output=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    kib = int(r.stderr.decode().rsplit("maxrss_kib", 1)[1].split()[0])
    return kib / 1024, json.loads(r.stdout)["validation"]


def test_validator_peak_memory_stays_under_the_bound(tmp_path):
    base, small = validate_peak_mib(tmp_path, SMALL)
    peak, verdict = validate_peak_mib(tmp_path, VERBOSE)
    print(f"validator peak RSS: {base:.0f} MiB on a small env, {peak:.0f} MiB on the verbose one")
    assert small["valid"] is True, small
    assert verdict["reason"] == "flood" and "MiB bound" in verdict["detail"], verdict
    # One candidate at a time: the stated bound is one worker's session_mb, plus one
    # reply being decoded and the validator's own copies of what it checks.
    assert peak - base < SandboxConfig().session_mb + 64


def test_bounds_are_checked_per_episode_and_per_worker():
    cfg = SandboxConfig(episode_mb=8, session_mb=24)
    with EnvSession(VERBOSE, cfg) as s:
        for _ in range(2):  # two episodes of 6 MiB each fit; an episode of 9 MiB does not
            s.reset(seed=0)
            for t in range(5):
                s.step(str(t))
        s.reset(seed=0)
        with pytest.raises(EnvError, match="this episode's replies hold 9 MiB, over the 8 MiB"):
            for t in range(8):
                s.step(str(t))
        assert not s.alive
    with EnvSession(VERBOSE, cfg) as s:
        with pytest.raises(EnvError, match="this worker's replies hold 25 MiB, over the 24 MiB"):
            for _ in range(6):
                s.reset(seed=0)
                for t in range(4):
                    s.step(str(t))
