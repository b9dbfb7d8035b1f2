"""Running spade-train on many processes: `accelerate launch` of a worker per process.

`spade-train --num-processes N` writes its resolved settings to a JSON file and starts
`accelerate launch ... -m spade_cli.train.launch SETTINGS RESULT`; every worker trains
its shard of each batch (data parallel) and the main one writes RESULT, which the
launcher turns into the `checkpoint` record on stdout. Worker output goes to stderr, so
stdout carries only that record.

Flags that matter (accelerate 1.15):
- CPU: `--multi_gpu --num_processes N` with `use_cpu=True` in the training arguments
  gives real gloo data parallelism; `--cpu --num_processes N` silently starts ONE process.
- GPU: `--num_processes N` (plus `--multi_gpu`, or a DeepSpeed/FSDP `--config_file`).
- Several machines: the same command on each, with `--num_machines`, `--machine_rank`,
  `--main_process_ip` and `--main_process_port` (examples/slurm/stage.sbatch does this under Slurm).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import ResourceError, SpadeError
from .config import TrainJob


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_command(
    settings: str,
    result: str,
    num_processes: int,
    accelerate_config: str | None = None,
    num_machines: int = 1,
    machine_rank: int = 0,
    main_process_ip: str | None = None,
    main_process_port: int | None = None,
    gpu: bool | None = None,
) -> list[str]:
    import torch

    gpu = torch.cuda.is_available() if gpu is None else gpu
    cmd = [sys.executable, "-m", "accelerate.commands.launch"]
    if accelerate_config:
        cmd += ["--config_file", accelerate_config]
    else:
        # Without a config file every option must be explicit, or accelerate asks questions
        # / falls back to its own defaults. --multi_gpu is right on CPU too (gloo), NOT --cpu.
        cmd += ["--multi_gpu", "--mixed_precision", "no", "--dynamo_backend", "no"]
    cmd += ["--num_processes", str(num_processes), "--num_machines", str(num_machines)]
    if num_machines > 1:
        if not main_process_ip:
            raise SpadeError("--num-machines > 1 needs --main-process-ip (the machine of rank 0)")
        cmd += ["--machine_rank", str(machine_rank), "--main_process_ip", main_process_ip]
    cmd += ["--main_process_port", str(main_process_port or free_port())]
    if not gpu and not accelerate_config:
        cmd += [
            "--num_cpu_threads_per_process",
            str(max(1, (os.cpu_count() or 1) // num_processes)),
        ]
    cmd += ["-m", "spade_cli.train.launch", settings, result]
    return cmd


def launch(cfg: TrainJob) -> dict | None:
    """Run the workers and return the main worker's result (None on machines of rank > 0)."""
    with tempfile.TemporaryDirectory(prefix="spade-train-") as tmp:
        settings = os.path.join(tmp, "settings.json")
        result = os.path.join(tmp, "result.json")
        cfg.save(settings)
        cmd = launch_command(
            settings,
            result,
            cfg.num_processes,
            cfg.accelerate_config,
            cfg.num_machines,
            cfg.machine_rank,
            cfg.main_process_ip,
            cfg.main_process_port,
        )
        env = {**os.environ, "SPADE_TRAIN_WORKER": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
        proc = subprocess.run(cmd, stdout=sys.stderr, env=env)
        res = json.loads(Path(result).read_text()) if os.path.exists(result) else None
        if res and "error" in res:
            err = SpadeError(res["error"])
            err.exit_code = res.get("exit_code", 1)
            raise err
        if proc.returncode != 0:
            raise ResourceError(
                f"training processes failed (accelerate exit {proc.returncode}); see messages above"
            )
        if res is None and cfg.machine_rank == 0:
            raise SpadeError("training finished without a result from the main process")
        return res


def main(argv: list[str]) -> int:
    """One worker process under `accelerate launch`."""
    settings, result = argv
    cfg = TrainJob.load(settings)
    from ..logs import setup_logging

    setup_logging("spade-train")
    from .grpo import run

    try:
        # Libraries print progress and summaries to stdout; keep it for records only.
        with contextlib.redirect_stdout(sys.stderr):
            info = run(cfg)
    except SpadeError as e:
        _write_once(result, {"error": str(e), "exit_code": e.exit_code})
        sys.stderr.write(f"spade-train: error: {e}\n")
        return e.exit_code
    if info is not None:
        Path(result).write_text(json.dumps(info))
    return 0


def _write_once(path: str, data: dict) -> None:
    # Every rank may fail the same way; the first writer wins.
    with contextlib.suppress(FileExistsError):
        with open(path, "x") as fh:
            fh.write(json.dumps(data))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
