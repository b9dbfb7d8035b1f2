"""`[loop] report_to`: round metrics and plots go to TensorBoard, trackio and wandb (offline),
read back here with each tracker's own reader."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from spade_cli.loop.trackers import flat_metrics, report_round

pytestmark = pytest.mark.requires_module("tensorboard", "trackio")

SUMMARY = {
    "kind": "round",
    "v": 1,
    "id": "round-x",
    "run": "r",
    "round": 1,
    "valid_rate": 0.5,
    "regret_mean": 0.25,
    "reasons": {"ok": 1, "trivial": 1},
    "model": "m",
    "stage_seconds": {"design": 2.0},
    "skills": {"games": {"valid_rate": 1.0}},
}


def tensorboard_scalars(logdir: Path) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "images": 0})
    acc.Reload()
    out = {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}
    out["__images__"] = {tag: len(acc.Images(tag)) for tag in acc.Tags()["images"]}
    return out


def trackio_logs(trackio_dir: Path, run: str) -> list[dict]:
    code = (
        "import json, sys; from trackio.sqlite_storage import SQLiteStorage; "
        f"print(json.dumps(SQLiteStorage.get_logs('spade', {run!r}), default=str))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        timeout=120,
        env={**os.environ, "TRACKIO_DIR": str(trackio_dir)},
    )
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    return orjson.loads(r.stdout.splitlines()[-1])


def wandb_records(path: Path) -> list[dict]:
    """The history rows of an offline run file: a LevelDB-style log (a 7-byte header, then
    32 KiB blocks of records with a crc32/length/type header) of Record protobufs."""
    import struct

    from wandb.proto import wandb_internal_pb2

    data, pos, chunks, buf = path.read_bytes(), 7, [], b""
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        buf, pos = buf + data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 4):  # a full record, or the last piece of one
            chunks.append(buf)
            buf = b""
    rows = []
    for chunk in chunks:
        rec = wandb_internal_pb2.Record()
        rec.ParseFromString(chunk)
        if rec.WhichOneof("record_type") == "history":
            rows.append(
                {
                    i.key or "/".join(i.nested_key): orjson.loads(i.value_json)
                    for i in rec.history.item
                }
            )
    return rows


def plot(path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 1])
    fig.savefig(path)
    plt.close(fig)
    return path


def test_flat_metrics_keeps_numbers_under_their_paths():
    m = flat_metrics(SUMMARY)
    assert m == {
        "round": 1.0,
        "valid_rate": 0.5,
        "regret_mean": 0.25,
        "reasons/ok": 1.0,
        "reasons/trivial": 1.0,
        "stage_seconds/design": 2.0,
        "skills/games/valid_rate": 1.0,
    }


def test_a_round_goes_to_tensorboard_once_even_when_reported_again(tmp_path):
    png = plot(tmp_path / "validity.png")
    for _ in range(2):  # a resumed loop summarises the finished round again
        report_round(tmp_path, "r", ["tensorboard"], SUMMARY, [png])
    scalars = tensorboard_scalars(tmp_path / "tensorboard")
    assert scalars["valid_rate"] == {1: 0.5}
    assert scalars["skills/games/valid_rate"] == {1: 1.0}
    assert scalars["__images__"] == {"plots/validity": 1}
    assert orjson.loads((tmp_path / "trackers.json").read_bytes()) == {"tensorboard": [1]}


@pytest.mark.slow
@pytest.mark.requires_module("wandb")
def test_wandb_offline_run_holds_the_round(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    report_round(tmp_path, "r", ["wandb"], SUMMARY, [plot(tmp_path / "regret.png")])
    runs = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 1, list((tmp_path / "wandb").rglob("*"))
    history = [h for h in wandb_records(runs[0]) if h.get("_step") == 1]
    assert any(h.get("valid_rate") == 0.5 and h.get("_step") == 1 for h in history), history


@pytest.mark.slow
def test_loop_reports_every_round_to_tensorboard_and_trackio(tiny_model, tmp_path):
    """The acceptance check: a two-round loop with report_to = ["tensorboard", "trackio"]
    writes both, and what each holds is metrics.jsonl's numbers, round by round."""
    cfg = tmp_path / "trk.toml"
    cfg.write_text(f"""
name = "trk"
rounds = 2
[loop]
report_to = ["tensorboard", "trackio"]
[model]
path = "{tiny_model}"
engine = "hf"
[baseline]
mode = "fixed-pool"
pool = "library"
pool_size = 1
[validate]
seeds = 1
[rollout]
episodes = 1
max_turns = 1
max_tokens = 8
[train]
enabled = false
""")
    trackio_dir = tmp_path / "trackio"
    r = subprocess.run(
        [sys.executable, "-m", "spade_cli", "loop", str(cfg), "--runs-dir", str(tmp_path / "runs")],
        capture_output=True,
        timeout=1200,
        env={**os.environ, "TRACKIO_DIR": str(trackio_dir)},
    )
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    run = tmp_path / "runs" / "trk"
    rows = [orjson.loads(x) for x in (run / "metrics.jsonl").read_bytes().splitlines()]
    # stdout is the round records alone: what the trackers print goes to stderr.
    assert [orjson.loads(x)["round"] for x in r.stdout.splitlines()] == [1, 2]
    assert [row["round"] for row in rows] == [1, 2]

    scalars = tensorboard_scalars(run / "tensorboard")
    logs = trackio_logs(trackio_dir, "trk")
    assert [log["step"] for log in logs] == [1, 2]
    for row, log in zip(rows, logs, strict=True):
        expected = flat_metrics(row)
        assert expected["valid_rate"] == 1.0  # the library's environments are valid
        for key, value in expected.items():
            assert scalars[key][row["round"]] == pytest.approx(value), key
            assert log[key] == pytest.approx(value), key
        assert any(k.startswith("plots/") for k in log)
    assert set(scalars["__images__"]) >= {"plots/validity", "plots/regret", "plots/success"}
    assert orjson.loads((run / "trackers.json").read_bytes()) == {
        "tensorboard": [1, 2],
        "trackio": [1, 2],
    }
