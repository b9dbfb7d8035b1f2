# spade task runner: `just --list`

set shell := ["bash", "-euo", "pipefail", "-c"]

# Install system packages (Debian: bubblewrap, zstd, jq) and the project with dev tools.
setup:
    if command -v apt-get >/dev/null && { ! command -v bwrap >/dev/null || ! command -v zstd >/dev/null || ! command -v jq >/dev/null; }; then apt-get update -qq && apt-get install -y -qq bubblewrap zstd jq; fi
    python3 -m pip install -q -e ".[dev]"
    # Held-out eval suites, without their dependency trees (README, spade-eval).
    python3 -m pip install -q --no-deps -r requirements-eval.txt
    just demo-corpus

# Build the demo corpus (the standard library's documentation as JSONL.zst), offline.
demo-corpus OUT="data/demo-corpus.jsonl.zst":
    mkdir -p "$(dirname {{OUT}})" && python3 -m spade_cli.corpus.demo {{OUT}}

# One complete CPU round: tiny offline model, demo corpus, example environments.
demo:
    python3 -m spade_cli loop examples/demo.toml

# Run the test suite (GPU tests skip without a GPU).
test *ARGS:
    python3 -m pytest -q {{ARGS}}

# The fast tier: every test but the slow and the Slurm ones (about 3 minutes on 2 cores).
test-fast *ARGS:
    python3 -m pytest -q -m "not slow and not slurm" {{ARGS}}

# Lint (ruff check, settings in pyproject.toml).
lint:
    python3 -m ruff check .

# Check formatting (ruff format --check); `just fmt` applies it.
fmt-check:
    python3 -m ruff format --check .

# Apply the formatting.
fmt:
    python3 -m ruff format .

# Apply lint fixes.
fix:
    python3 -m ruff check --fix .

# Regenerate the commands' option tables in docs/commands/, then build the manual strictly
# (a broken link or anchor, or a stale table, fails); the site goes to site/.
docs:
    python3 docs/gen_options.py
    python3 -m mkdocs build --strict

# Run every benchmark; each prints its figures.
bench:
    for b in bench/bench_*.py; do echo "== $b"; python3 "$b"; done

# The GPU check: every GPU path once, with figures (<= 8 minutes; `--device cpu --quick` on CPU).
gpu-check *ARGS:
    python3 bench/gpu_check.py {{ARGS}}
