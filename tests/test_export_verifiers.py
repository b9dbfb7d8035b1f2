"""spade-export --format verifiers against verifiers itself, offline: the exported package's
load_environment() (verifiers' own loader, by taskset id) and one real verifiers rollout per
environment, the policy a scripted OpenAI-compatible model double on 127.0.0.1 that replies
with the episode's solution, through verifiers' interception server and chat program."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading

import pytest

from spade_cli.export.spec import load_spec

from .conftest import ROOT, run_cli
from .test_export import as_exported, load_records, spade_replay, validated  # noqa: F401 - fixture

pytestmark = [pytest.mark.slow, pytest.mark.requires_module("verifiers.v1")]


class ScriptedModel:
    """Chat completions (streamed, as verifiers asks for them) whose n-th assistant turn of
    a conversation is `script[n]`."""

    def __init__(self):
        self.script: list[str] = []
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                turn = sum(m["role"] == "assistant" for m in body["messages"])
                text = model.script[turn] if turn < len(model.script) else "I pass."
                usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                head = {
                    "id": "c",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": body["model"],
                }
                chunks = [
                    {
                        **head,
                        "choices": [
                            {
                                "index": 0,
                                "delta": {"role": "assistant", "content": text},
                                "finish_reason": None,
                            }
                        ],
                    },
                    {
                        **head,
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                        "usage": usage,
                    },
                ]
                data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
                data += b"data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"


@pytest.fixture(scope="module")
def pool(validated, tmp_path_factory):  # noqa: F811 - the imported fixture
    out = tmp_path_factory.mktemp("export-verifiers") / "out"
    r = run_cli("export", str(validated), "--format", "verifiers", "-o", str(out), "--seeds", "1")
    assert r.returncode == 0, r.stderr.decode()
    return out


def test_exported_package_is_a_verifiers_project(pool):
    text = (pool / "pyproject.toml").read_text()
    assert '"verifiers==0.4.0"' in text and 'name = "spade-pool"' in text
    assert "def load_environment" in (pool / "spade_pool" / "__init__.py").read_text()


def test_load_environment_and_one_rollout_per_environment_score_spades_replay(pool, monkeypatch):
    import verifiers.v1 as vf
    from verifiers.v1.clients import EvalClientConfig, ModelContext
    from verifiers.v1.utils.loaders import load_environment

    monkeypatch.syspath_prepend(str(pool))
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "data" / "verifiers"))
    monkeypatch.setenv("SCRIPTED_MODEL_KEY", "none")
    import spade_pool

    env = spade_pool.load_environment()
    tasks = list(env.taskset)
    assert sorted(t.data.name.split("#")[0] for t in tasks) == ["VaultCode", "bank_api", "nim"]

    # The same env as a verifiers config names it, with the offline harness and a local runtime.
    config = vf.env_config_type("spade_pool", "").model_validate(
        {
            "taskset": {"id": "spade_pool"},
            "player": {
                "harness": {"id": "spade_direct_harness"},
                "runtime": {"type": "subprocess"},
                "max_turns": 40,
            },
        }
    )
    env = load_environment(config)
    model = ScriptedModel()
    ctx = ModelContext(
        model="scripted",
        client=EvalClientConfig(base_url=model.url, api_key_var="SCRIPTED_MODEL_KEY"),
    )

    async def rollout(task, script):
        model.script = script
        episode = await env.run_episode(task, ctx)
        assert episode.ok, episode.errors
        (trace,) = episode.traces
        return trace.rewards["spade_return"].score, trace.info

    async def play_all():
        results = []
        async with env.serving():
            for task in tasks:
                spec = load_spec(spade_pool.ENVS / task.data.info["env"])
                seed = task.data.info["seed"]
                assert task.data.prompt == spec.observations[str(seed)]
                solved = await rollout(task, spec.solutions[str(seed)])
                # A policy that never acts sensibly earns nothing (the shortest env only:
                # it plays to the turn limit).
                idle = await rollout(task, []) if spec.contract == "published" else None
                results.append((spec, seed, solved, idle))
        return results

    results = asyncio.run(play_all())
    for spec, seed, (score, info), idle in results:
        assert score == spade_replay(spec.code, seed) == 1.0, spec.name
        assert info["spade_id"] == spec.id and info["stop"] == "terminated"
        assert idle is None or idle[0] == 0.0, spec.name
    assert sum(idle is not None for *_, idle in results) == 1


def test_spade_cat_from_reads_the_verifiers_export_back(pool, validated):  # noqa: F811
    r = run_cli("cat", "--from", str(pool), "-o", "-")
    assert r.returncode == 0, r.stderr.decode()
    assert sorted(load_records(r.stdout), key=lambda c: c["id"]) == as_exported(validated)
