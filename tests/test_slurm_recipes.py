"""The Slurm driver submits every stage with the right arrays and dependencies. `sbatch`
is a test double that records its arguments (no Slurm here); the job scripts themselves
are checked for syntax."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from .conftest import ROOT

SLURM = ROOT / "examples" / "slurm"


@pytest.mark.parametrize("script", sorted(p.name for p in SLURM.glob("*.sbatch")) + ["submit-round.sh"])
def test_scripts_parse(script):
    subprocess.run(["bash", "-n", str(SLURM / script)], check=True)


def test_driver_chains_the_stages(tmp_path):
    log = tmp_path / "sbatch.log"
    fake = tmp_path / "bin" / "sbatch"
    fake.parent.mkdir()
    fake.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$*" >> {log}\n'
        f'n=$(wc -l < {log}); echo $((1000 + n))\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}",
           "SPADE_RUN": str(tmp_path / "run"), "SPADE_MODEL": "/models/m", "SPADE_ROUND": "2",
           "SPADE_SHARDS": "4"}
    r = subprocess.run(["bash", str(SLURM / "submit-round.sh")], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    calls = log.read_text().splitlines()
    assert len(calls) == 6
    docs, design, validate, rollout, regret, train = calls
    assert "--array=0-3" in docs and docs.endswith("sample-docs.sbatch")
    assert "--array=0-3 --dependency=afterok:1001" in design
    assert "--dependency=aftercorr:1002" in validate and "--dependency=aftercorr:1003" in rollout
    assert "--dependency=afterok:1004" in regret and "--array" not in regret
    assert "--dependency=afterok:1005" in train
    assert train.endswith(f"train.sbatch {tmp_path}/run/round-002/scored.jsonl.zst /models/m "
                          f"{tmp_path}/run/round-002/checkpoint")
    assert "round 2: docs=1001 design=1002 validate=1003 rollout=1004 regret=1005 train=1006" in r.stdout
