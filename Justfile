# spade task runner: `just --list`

set shell := ["bash", "-euo", "pipefail", "-c"]

# The README's first command is `just install demo`: what the commands need, and no more.
# Install the system packages, the project, the demo corpus and the micro model.
install:
    if command -v apt-get >/dev/null && { ! command -v bwrap >/dev/null || ! command -v zstd >/dev/null || ! command -v jq >/dev/null || ! python3 -c "import ctypes; ctypes.CDLL('libseccomp.so.2')" 2>/dev/null; }; then apt-get update -qq && apt-get install -y -qq bubblewrap libseccomp2 zstd jq; fi
    python3 -m pip install -q -e .
    just demo-corpus
    just micro-model

# On top of `install`: dev tools, spade-export's formats, the loop's trackers, the held-out
# eval suites and Harbor (in .venv-harbor, for the Harbor export's tests).
# Install everything the tests need: `install`, the dev tools and the eval suites.
setup: install
    python3 -m pip install -q -e ".[dev,export,trackers]"
    # Held-out eval suites, without their dependency trees (README, spade-eval).
    python3 -m pip install -q --no-deps -r requirements-eval.txt
    just harbor-venv

# Harbor (it needs Python >= 3.12) in a venv of its own, .venv-harbor/: the Harbor export's
# tests read the tasks spade-export writes with harbor's own task model.
harbor-venv:
    py=""; for c in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3 python3.13 python3.12; do \
        if "$c" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then py="$c"; break; fi; done; \
    if [ -z "$py" ]; then echo "harbor-venv: no Python >= 3.12 here: the Harbor tests skip (fail under CI)" >&2; exit 0; fi; \
    "$py" -m venv .venv-harbor && .venv-harbor/bin/python -m pip install -q harbor==0.25.0

# Build the demo corpus (the standard library's documentation as JSONL.zst), offline.
demo-corpus OUT="data/demo-corpus.jsonl.zst":
    mkdir -p "$(dirname {{OUT}})" && python3 -m spade_cli.corpus.demo {{OUT}}

# The micro world's model (the build that ships in spade_cli/micro/weights; a recipe with
# no shipped build is pretrained once, a few minutes, into $SPADE_CACHE or ~/.cache/spade).
micro-model OUT="data/micro-model":
    python3 -m spade_cli init-model --kind micro {{OUT}} --force

# Pretrain the micro model from scratch (about 10 minutes on 2 cores) and ship that build:
# after a change to its recipe (spade_cli/micro/model.py), whose test fails until then.
micro-weights:
    python3 -m spade_cli init-model --kind micro --rebuild spade_cli/micro/weights --force

# One complete CPU round of the micro world: micro model, demo corpus, designed environments.
demo:
    python3 -m spade_cli loop examples/demo.toml

# SPADE against the fixed pool, a frozen designer and a negative control in the micro
# world (bench/micro_experiment.py; resumable; about an hour on 2 cores).
micro-experiment *ARGS:
    python3 bench/micro_experiment.py {{ARGS}}

# Each finished run's final designer against the model it started from, on the same
# prompts, played by one agent (bench/micro_designer_probe.py; after micro-experiment).
micro-designer-probe *ARGS:
    python3 bench/micro_designer_probe.py {{ARGS}}

# The micro model's designer alone on a fixed reward that peaks at another level per
# family: can one shared model choose a level per family? (bench/designer_bandit.py)
designer-bandit *ARGS:
    python3 bench/designer_bandit.py {{ARGS}}

# Which facts of the micro world a model acts on (bench/micro_reading.py; --model DIR).
micro-reading *ARGS:
    python3 bench/micro_reading.py {{ARGS}}

# Run the test suite (GPU tests skip without a GPU); the 20 slowest are listed at the end.
test *ARGS:
    python3 -m pytest -q --durations=20 {{ARGS}}

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
