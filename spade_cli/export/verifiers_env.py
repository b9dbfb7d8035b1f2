"""verifiers (`verifiers`): the whole pool as one installable Python package.

    pyproject.toml                  package spade_pool: verifiers and spade-cli (pinned)
    spade_pool/__init__.py          SpadePool (taskset), SpadePoolEnv (env), load_environment()
    spade_pool/envs/<slug>/spade/   env.py + spade.json of each environment (spec.py)

`pip install ./OUT`, then the taskset id `spade_pool` works wherever verifiers takes one
(`vf-eval spade_pool`, prime-rl's env config), and `spade_pool.load_environment()` builds
the env in Python. The classes are `verifiers_taskset.py`'s; the package only says where
its environments are.
"""

from __future__ import annotations

from pathlib import Path

from .spec import ExportedEnv, write_spec, write_text

PACKAGE = "spade_pool"
PIN = "verifiers==0.4.0"

INIT = '''"""A spade environment pool as a verifiers taskset ({n} environments).

    import spade_pool
    env = spade_pool.load_environment()            # a verifiers.v1 Env
    # or the taskset id `spade_pool` in a verifiers config / `vf-eval spade_pool`

Each environment's code (envs/*/spade/env.py) runs in spade's bubblewrap sandbox; its
spade.json has the environment's id, skill, hint, solutions and scores.
"""

from pathlib import Path

from spade_cli.export.verifiers_taskset import SpadePoolEnv, SpadePoolTaskset

ENVS = Path(__file__).resolve().parent / "envs"


class SpadePool(SpadePoolTaskset):
    ENVS = ENVS


class SpadePoolEnvironment(SpadePoolEnv):
    ENVS = ENVS


def load_environment(**taskset):
    """The verifiers env of this pool; `taskset` fields (seeds_per_env, ...) configure it."""
    import verifiers.v1 as vf
    from verifiers.v1.utils.loaders import load_environment as load

    config = vf.env_config_type(__name__, "").model_validate({{"taskset": {{"id": __name__, **taskset}}}})
    return load(config)


__all__ = ["SpadePool", "SpadePoolEnvironment", "load_environment"]
'''

PYPROJECT = """[project]
name = "spade-pool"
version = "0.1.0"
description = "{n} spade environments as a verifiers taskset"
requires-python = ">=3.11"
dependencies = ["{pin}", "spade-cli"]

[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[tool.setuptools.packages.find]
include = ["{package}*"]

[tool.setuptools.package-data]
{package} = ["envs/*/spade/*"]
"""


def write(specs: list[ExportedEnv], out: Path, slugs: dict[str, str]) -> list[Path]:
    pkg = out / PACKAGE
    written = [
        write_spec(s, pkg / "envs" / slugs[s.id] / "spade", "verifiers").parent for s in specs
    ]
    write_text(pkg / "__init__.py", INIT.format(n=len(specs)))
    write_text(out / "pyproject.toml", PYPROJECT.format(n=len(specs), pin=PIN, package=PACKAGE))
    return written
