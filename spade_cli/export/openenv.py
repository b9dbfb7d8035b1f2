"""OpenEnv (`openenv-core`): each environment as a server directory that `openenv serve`,
`uvicorn server.app:app` or a Space runs, and TRL or TorchRL train on.

    <slug>/openenv.yaml       spec_version 1, runtime fastapi, app server.app:app
    <slug>/pyproject.toml     openenv-core and spade-cli (pinned), a `server` script
    <slug>/server/app.py      create_app() of this module on ../spade
    <slug>/spade/             env.py + spade.json (spec.py)

The server speaks OpenEnv's HTTP and WebSocket protocol (/reset, /step, /state, /schema,
/ws). An action is `{"message": "<the agent's reply>"}`; an observation is `{"text":
...}` with reward and done. Every WebSocket session holds an `Episode` of its own: one
sandboxed worker, so up to MAX_CONCURRENT_ENVS sessions (default 8) play at once and
none of the environment's code runs in the server. Rewards add up to spade's return.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from .spec import Episode, ExportedEnv, load_spec, sandbox_config, write_spec, write_text

PIN = "openenv-core==0.3.0"

APP = '''"""OpenEnv server of the spade environment {name} ({id}).

    uvicorn server.app:app --host 0.0.0.0 --port 8000     (or: openenv serve, uv run server)

The environment's code (../spade/env.py) runs in spade's bubblewrap sandbox, one worker
per session; ../spade/spade.json has its id, skill, hint, solutions and scores.
"""

import os
from pathlib import Path

from spade_cli.export.openenv import create_app

app = create_app(Path(__file__).resolve().parent.parent / "spade")


def main():
    import uvicorn

    uvicorn.run(app, host=os.environ.get("HOST", "0.0.0.0"), port=int(os.environ.get("PORT", "8000")))


if __name__ == "__main__":
    main()
'''

PYPROJECT = """[project]
name = "{package}"
version = "0.1.0"
description = "spade environment {name} ({id}) as an OpenEnv server"
requires-python = ">=3.11"
dependencies = ["{pin}", "spade-cli"]

[project.scripts]
server = "server.app:main"

[tool.setuptools]
packages = ["server"]
"""


def write(spec: ExportedEnv, directory: Path) -> Path:
    write_spec(spec, directory / "spade", "openenv")
    (directory / "server").mkdir(exist_ok=True)
    fields = {"name": spec.name, "id": spec.id}
    write_text(directory / "server" / "__init__.py", "")
    write_text(directory / "server" / "app.py", APP.format(**fields))
    write_text(
        directory / "openenv.yaml",
        f"spec_version: 1\nname: {directory.name}\ntype: space\n"
        "runtime: fastapi\napp: server.app:app\nport: 8000\n",
    )
    write_text(
        directory / "pyproject.toml",
        PYPROJECT.format(package=directory.name.replace("_", "-"), pin=PIN, **fields),
    )
    return directory


def create_app(spec_dir: str | Path, max_concurrent_envs: int | None = None):
    """The FastAPI app of the environment exported into `spec_dir`."""
    from openenv.core.env_server import Action, Environment, Observation, State, create_app
    from openenv.core.env_server.types import EnvironmentMetadata
    from pydantic import Field

    spec = load_spec(spec_dir)
    cfg = sandbox_config()

    class SpadeAction(Action):
        message: str = Field(
            description="The agent's reply: one action (a JSON tool call "
            "for a tool-use environment)"
        )

    class SpadeObservation(Observation):
        text: str = Field(default="", description="What the environment shows the agent")

    class SpadeState(State):
        seed: int | None = None
        episode_return: float = 0.0
        stop: str | None = None

    class SpadeEnvironment(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True  # each instance has a sandboxed worker of its own

        def __init__(self):
            super().__init__()
            self.episode: Episode | None = None
            self._state = SpadeState()

        def reset(self, seed=None, episode_id=None, **kwargs):
            if self.episode is None:
                self.episode = Episode(spec, cfg)  # started here: the server's probe costs nothing
            seed = spec.seeds[0] if seed is None else int(seed)
            obs, _info = self.episode.reset(seed=seed)  # info holds the solution: never sent
            self._state = SpadeState(episode_id=episode_id or uuid.uuid4().hex, seed=seed)
            return SpadeObservation(text=obs, done=False, reward=None)

        def step(self, action, timeout_s=None, **kwargs):
            if self.episode is None or self.episode.done:
                return SpadeObservation(
                    text="The episode is over: reset to play again.", done=True, reward=0.0
                )
            obs, reward, done = self.episode.step(action.message)
            self._state.step_count += 1
            self._state.episode_return = self.episode.episode_return
            self._state.stop = self.episode.stop
            return SpadeObservation(text=obs, done=done, reward=reward)

        @property
        def state(self):
            return self._state

        def get_metadata(self):
            env = spec.record.get("env") or spec.record
            return EnvironmentMetadata(
                name=spec.name,
                description=str(env.get("summary") or spec.name),
                version=str(spec.record.get("id")),
                author="spade",
            )

        def close(self):
            if self.episode is not None:
                self.episode.close()
                self.episode = None

    limit = max_concurrent_envs or int(os.environ.get("MAX_CONCURRENT_ENVS", "8"))
    return create_app(
        SpadeEnvironment,
        SpadeAction,
        SpadeObservation,
        env_name=spec.name,
        max_concurrent_envs=limit,
    )
