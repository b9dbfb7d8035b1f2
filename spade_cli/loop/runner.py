"""Run rounds of the stage commands, resumably.

Each stage is the same command a user would type (`python -m spade_cli <stage> ...`), so
`spade-loop` and the `bin/` pipeline produce the same records. A stage's output is
written atomically by the stage itself; the round's `manifest.json` records each finished
stage (written atomically after it). A rerun skips every stage the manifest marks done
whose outputs exist, so a loop killed at any moment, SIGKILL included, continues from the
last completed stage. Stages are deterministic given the seed, so the resumed run equals
an uninterrupted one.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..cli import log, progress_bar, verbosity_args
from ..envs.library import library_dir
from ..errors import SpadeError, UsageError
from ..recordio import atomic_write_bytes
from .config import LoopConfig, to_dict
from .report import round_summary


def demo_corpus_path(run_dir: Path) -> Path:
    """The bundled demo corpus, built offline into the run directory on first use."""
    path = run_dir / "demo-corpus.jsonl.zst"
    if not path.exists():
        from ..corpus.demo import build_demo_corpus

        log.info("building the demo corpus in %s", path)
        build_demo_corpus(str(path))
    return path


@dataclass
class Stage:
    name: str
    argv: list[str]
    outputs: list[Path]
    before: Callable[[], None] | None = None
    env: dict[str, str] = field(default_factory=dict)


def _die_with_parent() -> None:
    # A stage must not outlive a killed loop: the kernel sends it SIGKILL when we die.
    PR_SET_PDEATHSIG = 1
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


class Round:
    """The stages of round `r` and their bookkeeping in `round-NNN/manifest.json`."""

    def __init__(self, cfg: LoopConfig, r: int, model: str):
        self.cfg, self.r, self.model = cfg, r, model
        self.dir = cfg.run_dir / f"round-{r:03d}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.manifest_path = self.dir / "manifest.json"
        self.manifest: dict[str, Any] = {"round": r, "model": model, "stages": {}}
        if self.manifest_path.exists():
            old = orjson.loads(self.manifest_path.read_bytes())
            if old.get("model") == model:
                self.manifest = old

    def path(self, name: str) -> Path:
        return self.dir / name

    def done(self, stage: Stage) -> bool:
        info = self.manifest["stages"].get(stage.name)
        return bool(info and info.get("status") == "done" and all(p.exists() for p in stage.outputs))

    def run(self, stage: Stage) -> float:
        if self.done(stage):
            log.debug("round %d: %s already done", self.r, stage.name)
            return 0.0
        if stage.before is not None:
            stage.before()
        cmd = [sys.executable, "-m", "spade_cli", *stage.argv, *verbosity_args()]
        log.info("round %d: %s", self.r, " ".join(["spade-" + stage.argv[0], *stage.argv[1:]]))
        t = time.perf_counter()
        proc = subprocess.run(cmd, preexec_fn=_die_with_parent, env={**os.environ, **stage.env},
                              stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - t
        if proc.returncode != 0:
            err = SpadeError(
                f"round {self.r}: stage {stage.name} failed (exit {proc.returncode}); "
                f"its message is above. Rerun to resume from this stage."
            )
            # The loop exits with the stage's own code (3 bad data, 4 missing resource...).
            err.exit_code = proc.returncode if proc.returncode > 0 else 1
            raise err
        missing = [str(p) for p in stage.outputs if not p.exists()]
        if missing:
            raise SpadeError(f"round {self.r}: stage {stage.name} wrote no {', '.join(missing)}")
        self.manifest["stages"][stage.name] = {
            "status": "done",
            "seconds": round(seconds, 3),
            "argv": ["spade-" + stage.argv[0], *stage.argv[1:]],
            "outputs": [p.name for p in stage.outputs],
        }
        atomic_write_bytes(str(self.manifest_path), orjson.dumps(self.manifest, option=orjson.OPT_INDENT_2))
        return seconds


def _copy_atomic(src: Path, dst: Path) -> None:
    tmp = dst.with_name(f".{dst.name}.partial-{os.getpid()}")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


class Loop:
    def __init__(self, cfg: LoopConfig):
        self.cfg = cfg
        self.run_dir = cfg.run_dir
        self.run_dir.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ run-level state

    def _lock(self) -> Any:
        fh = open(self.run_dir / ".lock", "w")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"{self.run_dir}: another spade-loop is running on this run") from None
        return fh

    def _check_config(self) -> None:
        """A run directory belongs to one config: resuming with another is an error."""
        path = self.run_dir / "config.json"
        current = to_dict(self.cfg)
        frozen = {k: v for k, v in current.items() if k != "rounds"}
        if path.exists():
            old = orjson.loads(path.read_bytes())
            if {k: v for k, v in old.items() if k != "rounds"} != frozen:
                raise UsageError(
                    f"{self.run_dir}: holds a run with a different config; use another name "
                    "or delete the directory"
                )
        atomic_write_bytes(str(path), orjson.dumps(current, option=orjson.OPT_INDENT_2))

    def base_model(self) -> str:
        if self.cfg.model.path:
            return self.cfg.model.path
        tiny = self.run_dir / "tiny-model"
        if not (tiny / "config.json").exists():
            log.info("building the tiny offline model in %s", tiny)
            from ..tinymodel import build_tiny_model

            build_tiny_model(str(tiny), seed=self.cfg.seed)
        return str(tiny)

    def initial_memory(self) -> Path | None:
        """Round 1's memory: the example environment library, unless memory is off."""
        if self.cfg.design.no_memory and self.cfg.rollout.replay == 0:
            return None
        path = self.run_dir / "memory-000.jsonl.zst"
        if not path.exists():
            from ..envs.library import load_library
            from ..memory import entries_from_library, save_memory

            save_memory(str(path), entries_from_library(load_library()))
        return path

    def sandbox_packages(self) -> list[str]:
        packages = list(self.cfg.sandbox.packages)
        if self.cfg.baseline.mode == "fixed-pool" and self.cfg.baseline.pool.startswith("reasoning-gym"):
            packages.append("reasoning-gym")
        return list(dict.fromkeys(packages))

    # ------------------------------------------------------------------ stages

    def stages(self, rnd: Round, memory_in: Path | None) -> list[Stage]:
        cfg, r = self.cfg, rnd.r
        seed = str(cfg.seed * 1000 + r)
        model_args = ["--model", rnd.model, "--engine", cfg.model.engine]
        if cfg.model.base_url:
            model_args += ["--base-url", cfg.model.base_url]
        if cfg.model.tensor_parallel > 1:
            model_args += ["--tensor-parallel", str(cfg.model.tensor_parallel)]
        sandbox = ["--unsafe-no-sandbox"] if cfg.sandbox.unsafe_no_sandbox else []
        for package in self.sandbox_packages():
            sandbox += ["--sandbox-package", package]
        docs, cands = rnd.path("docs.jsonl.zst"), rnd.path("candidates.jsonl.zst")
        validated, replay = rnd.path("validated.jsonl.zst"), rnd.path("replay.jsonl.zst")
        rollouts, scored = rnd.path("rollouts.jsonl.zst"), rnd.path("scored.jsonl.zst")
        memory_out = rnd.path("memory.jsonl.zst")
        out: list[Stage] = []

        if cfg.baseline.mode == "fixed-pool":
            pool = str(library_dir()) if cfg.baseline.pool == "library" else cfg.baseline.pool
            if pool.startswith("reasoning-gym"):
                # The task families as contract environments, then drawn like any pool.
                source = rnd.path("pool-source.jsonl.zst")
                out.append(Stage("pool-source", ["eval", "--emit-pool", "--suite", pool, "-o", str(source)],
                                 [source]))
                pool = str(source)
            out.append(Stage("pool", ["memory", "pool", pool, "-n", str(cfg.baseline.pool_size),
                                      "--round", str(r), "--seed", seed, "-o", str(cands)], [cands]))
        else:
            corpus = cfg.corpus.paths or [str(demo_corpus_path(self.run_dir))]
            sample = ["sample-docs", *corpus, "-n", str(cfg.corpus.docs_per_round), "--seed", seed,
                      "--text-field", cfg.corpus.text_field,
                      "--excerpt-chars", str(cfg.corpus.excerpt_chars)]
            if cfg.corpus.mix:
                sample += ["--mix", cfg.corpus.mix]
            out.append(Stage("sample-docs", [*sample, *cfg.corpus.extra_args, "-o", str(docs)], [docs]))
            design = ["design", str(docs), *model_args, "--num-designs", str(cfg.design.designs_per_doc),
                      "--max-tokens", str(cfg.design.max_tokens), "--temperature", str(cfg.design.temperature),
                      "--top-p", str(cfg.design.top_p), "--round", str(r), "--seed", seed]
            if cfg.design.no_doc:
                design.append("--no-doc")
            if cfg.design.no_memory or memory_in is None:
                design.append("--no-memory")
            else:
                design += ["--memory", str(memory_in)]
            out.append(Stage("design", [*design, *cfg.design.extra_args, "-o", str(cands)], [cands]))

        out.append(Stage("validate", ["validate", str(cands), "--seeds", str(cfg.validate.seeds),
                                      "--workers", str(cfg.validate.workers), *sandbox,
                                      *cfg.validate.extra_args, "-o", str(validated)], [validated]))
        rollout_inputs = [str(validated)]
        if cfg.rollout.replay > 0 and memory_in is not None and cfg.baseline.mode == "spade":
            out.append(Stage("replay", ["memory", "replay", str(memory_in), "-n", str(cfg.rollout.replay),
                                        "--round", str(r), "--seed", seed, "-o", str(replay)], [replay]))
            rollout_inputs += ["--replay", str(replay)]
        out.append(Stage("rollout", ["rollout", *rollout_inputs, *model_args, "-k", str(cfg.rollout.episodes),
                                     "--max-turns", str(cfg.rollout.max_turns),
                                     "--max-tokens", str(cfg.rollout.max_tokens),
                                     "--max-context", str(cfg.rollout.max_context),
                                     "--temperature", str(cfg.rollout.temperature), "--seed", seed,
                                     *sandbox, *cfg.rollout.extra_args, "-o", str(rollouts)], [rollouts]))

        regret = ["regret", str(rollouts), "--estimator", cfg.regret.estimator,
                  "--invalid-penalty", str(cfg.regret.invalid_penalty), "--round", str(r)]
        before = None
        if memory_in is not None:
            regret += ["--memory", str(memory_out)]
            # The stage owns a fresh copy of the previous memory, so a rerun after a kill
            # in mid-stage starts again from the same memory.
            before = lambda: _copy_atomic(memory_in, memory_out)  # noqa: E731
        out.append(Stage("regret", [*regret, *cfg.regret.extra_args, "-o", str(scored)],
                         [scored] + ([memory_out] if memory_in is not None else []), before=before))

        if cfg.train.enabled:
            ckpt, ckpt_rec = rnd.path("checkpoint"), rnd.path("checkpoint.jsonl")
            train = ["train", str(scored), "--model", rnd.model, "--output-dir", str(ckpt),
                     "--role", cfg.train.role if cfg.baseline.mode == "spade" else "agent",
                     "--lr", str(cfg.train.learning_rate), "--epochs", str(cfg.train.epochs),
                     "--per-device-batch-size", str(cfg.train.batch_size), "--seed", seed,
                     "--metrics", str(rnd.path("train-metrics.jsonl")), "--if-empty", "keep"]
            if cfg.train.num_processes > 1:
                train += ["--num-processes", str(cfg.train.num_processes)]
            if cfg.train.lora_r > 0:
                train += ["--lora-r", str(cfg.train.lora_r)]
            out.append(Stage("train", [*train, *cfg.train.extra_args, "-o", str(ckpt_rec)], [ckpt_rec]))

        if cfg.eval.suites:
            evals = rnd.path("eval.jsonl.zst")
            model = str(rnd.path("checkpoint")) if cfg.train.enabled else rnd.model
            # The same items every round, so checkpoints are comparable.
            argv = ["eval", "--model", model, "--engine", cfg.model.engine, "--num-items", str(cfg.eval.items),
                    "--seed", str(cfg.seed)]
            for s in cfg.eval.suites:
                argv += ["--suite", s]
            out.append(Stage("eval", [*argv, *cfg.eval.extra_args, "-o", str(evals)], [evals]))
        return out

    # ------------------------------------------------------------------ driver

    def next_model(self, rnd: Round) -> str:
        """The checkpoint of round r is the model of round r+1."""
        if not self.cfg.train.enabled:
            return rnd.model
        rec = orjson.loads(rnd.path("checkpoint.jsonl").read_bytes().splitlines()[0])
        return str(rec.get("path") or rnd.path("checkpoint"))

    def run(self, on_round: Callable[[Round, dict], None] | None = None) -> list[dict]:
        lock = self._lock()
        try:
            self._check_config()
            model = self.base_model()
            memory_in = self.initial_memory()
            summaries = []
            per_round = len(self.stages(Round(self.cfg, 1, model), memory_in))
            bar = progress_bar("spade-loop", total=per_round * self.cfg.rounds, unit="stage")
            for r in range(1, self.cfg.rounds + 1):
                rnd = Round(self.cfg, r, model)
                for stage in self.stages(rnd, memory_in):
                    bar.set_description(f"round {r}/{self.cfg.rounds} {stage.name}")
                    rnd.run(stage)
                    bar.update(1)
                summary = round_summary(self.cfg, rnd)
                summaries.append(summary)
                if on_round:
                    on_round(rnd, summary)
                if (rnd.path("memory.jsonl.zst")).exists():
                    memory_in = rnd.path("memory.jsonl.zst")
                model = self.next_model(rnd)
            bar.close()
            return summaries
        finally:
            lock.close()
