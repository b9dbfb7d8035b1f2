"""Engines on the tiny model: the hf engine end to end on CPU, the OpenAI-compatible
client against a real local HTTP server, vLLM behind the gpu marker."""

from __future__ import annotations

import pytest

from spade_cli.engines import Generation, Sampling, load_engine, resolve_engine
from spade_cli.errors import ResourceError, UsageError
from tests.helpers import assert_same

CONVS = [
    [{"role": "user", "content": "Write a new environment."}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello " * 40}],
    [{"role": "user", "content": "é 🙂"}],
]


@pytest.fixture(scope="module")
def hf(tiny_model):
    return load_engine(str(tiny_model), "hf", max_batch_size=8)


def check_generation(engine, g: Generation, prompt_ids: list[int], sampling: Sampling):
    assert g.prompt_ids == prompt_ids
    assert 0 < len(g.completion_ids) <= sampling.max_tokens
    assert g.finish_reason in ("stop", "length")
    if g.finish_reason == "length":
        assert len(g.completion_ids) == sampling.max_tokens
    assert g.logprobs is None or len(g.logprobs) == len(g.completion_ids)
    assert all(lp <= 0.0 for lp in g.logprobs or [])
    if not sampling.stop:
        assert g.text == engine.tokenizer.decode(g.completion_ids, skip_special_tokens=True)


def test_auto_resolves_to_hf_without_vllm_or_gpu():
    import importlib.util

    import torch

    expect = "vllm" if importlib.util.find_spec("vllm") and torch.cuda.is_available() else "hf"
    assert resolve_engine("auto") == expect
    with pytest.raises(UsageError):
        resolve_engine("nope")


def test_missing_model_is_resource_error(tmp_path):
    with pytest.raises(ResourceError):
        load_engine(str(tmp_path / "absent"), "hf")


def test_missing_vllm_is_resource_error(tiny_model):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    with pytest.raises(ResourceError, match="vllm"):
        load_engine(str(tiny_model), "vllm")


def test_hf_chat_records_complete_and_ids_consistent(hf):
    s = Sampling(temperature=1.0, max_tokens=16, seed=7)
    gens = hf.chat(CONVS, s)
    assert len(gens) == len(CONVS)
    for conv, g in zip(CONVS, gens, strict=True):
        check_generation(hf, g, hf.chat_ids(conv), s)
        assert hf.tokenizer.decode(g.prompt_ids).endswith("<|im_start|>assistant\n")


@pytest.mark.slow
def test_hf_deterministic_with_seed(hf):
    s = Sampling(temperature=1.0, top_p=0.95, max_tokens=12, seed=123)
    a, b = hf.chat(CONVS, s), hf.chat(CONVS, s)
    assert [g.completion_ids for g in a] == [g.completion_ids for g in b]
    assert_same([g.logprobs for g in a], [g.logprobs for g in b])
    c = hf.chat(CONVS, Sampling(temperature=1.0, top_p=0.95, max_tokens=12, seed=124))
    assert [g.completion_ids for g in a] != [g.completion_ids for g in c]


@pytest.mark.slow
def test_hf_logprobs_match_a_forward_pass(hf):
    import torch

    s = Sampling(temperature=0.7, max_tokens=10, seed=1)
    for g in hf.chat(CONVS, s):
        ids = torch.tensor([g.prompt_ids + g.completion_ids])
        with torch.no_grad():
            logp = torch.log_softmax(hf.lm(ids).logits[0].float() / 0.7, dim=-1)
        n = len(g.prompt_ids)
        ref = [logp[n - 1 + t, tok].item() for t, tok in enumerate(g.completion_ids)]
        assert g.logprobs == pytest.approx(ref, abs=1e-4)
    # With top_p < 1 the logprob is that of the renormalised nucleus: never lower.
    for g in hf.chat(CONVS, Sampling(temperature=0.7, top_p=0.5, max_tokens=10, seed=1)):
        ids = torch.tensor([g.prompt_ids + g.completion_ids])
        with torch.no_grad():
            logp = torch.log_softmax(hf.lm(ids).logits[0].float() / 0.7, dim=-1)
        n = len(g.prompt_ids)
        full = [logp[n - 1 + t, tok].item() for t, tok in enumerate(g.completion_ids)]
        assert all(a >= b - 1e-5 for a, b in zip(g.logprobs, full, strict=True))
        assert any(a > b + 1e-3 for a, b in zip(g.logprobs, full, strict=True))


def test_hf_left_padding_does_not_change_greedy_output(hf):
    s = Sampling(temperature=0.0, max_tokens=8)
    batched = hf.chat(CONVS, s)
    alone = [hf.chat([c], s)[0] for c in CONVS]
    assert [g.completion_ids for g in batched] == [g.completion_ids for g in alone]


def test_hf_batch_of_repeated_and_one_token_prompts_matches_alone(hf):
    # Unequal prompts are prefilled one distinct prompt at a time into a shared padded
    # cache; a one-token prompt sends the batch through generate's own padded prefill.
    ids = [hf.chat_ids(c) for c in CONVS]
    s = Sampling(temperature=0.0, max_tokens=6)
    for prompts in ([ids[1], ids[0], ids[1], ids[2]], [ids[0], [ids[0][0]]]):
        batched = hf.generate(prompts, s)
        alone = [hf.generate([p], s)[0] for p in prompts]
        for b, a in zip(batched, alone, strict=True):
            assert b.completion_ids == a.completion_ids and b.finish_reason == a.finish_reason
            assert b.logprobs == pytest.approx(a.logprobs, abs=1e-4)


def test_hf_per_request_sampling_and_stop_strings(hf):
    # A stop string that the first greedy completion surely contains: its 3rd token's text.
    probe = hf.chat(CONVS[:1], Sampling(temperature=0.0, max_tokens=8))[0]
    piece = hf.tokenizer.decode(probe.completion_ids[2:3])
    assert piece
    stops = [
        Sampling(temperature=0.0, max_tokens=8, stop=[piece]),
        Sampling(temperature=0.0, max_tokens=3),
    ]
    g_stop, g_short = hf.chat([CONVS[0], CONVS[0]], stops)
    assert g_stop.finish_reason == "stop" and piece not in g_stop.text
    assert g_stop.completion_ids == probe.completion_ids[: len(g_stop.completion_ids)]
    assert len(g_stop.completion_ids) <= 3
    assert g_short.finish_reason == "length" and g_short.completion_ids == probe.completion_ids[:3]


def test_hf_end_of_turn_token_kept_and_context_limit(tiny_model):
    eng = load_engine(str(tiny_model), "hf", max_model_len=64)
    prompt = eng.chat_ids(CONVS[0])
    long_prompt = list(range(5, 75))
    out = eng.generate([prompt, long_prompt], Sampling(max_tokens=200, seed=0, temperature=0))
    assert len(prompt) + len(out[0].completion_ids) <= 64
    assert out[1].finish_reason == "context" and out[1].completion_ids == []
    # Force the end-of-turn token: an output layer whose only choice is <|im_end|>.
    import torch

    eos = eng.tokenizer.convert_tokens_to_ids("<|im_end|>")
    head = torch.nn.Linear(eng.lm.lm_head.in_features, eng.lm.lm_head.out_features, bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.fill_(-10.0)
        head.bias[eos] = 10.0
    eng.lm.lm_head = head
    g = eng.generate([prompt], Sampling(max_tokens=5, temperature=0))[0]
    assert g.completion_ids == [eos] and g.finish_reason == "stop" and g.text == ""


def test_chat_with_tools_uses_template(hf):
    tools = [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}]
    ids = hf.chat_ids(CONVS[0], tools)
    assert "<tools>" in hf.tokenizer.decode(ids)
    gens = hf.chat([CONVS[0], CONVS[2]], Sampling(max_tokens=4, seed=0), tools=[tools, None])
    assert gens[0].prompt_ids == ids and gens[1].prompt_ids == hf.chat_ids(CONVS[2])


# --------------------------------------------------------------------------- OpenAI-compatible


class _Server:
    """A minimal OpenAI-compatible server on 127.0.0.1 backed by the hf engine: the test
    double of a remote vLLM. `token_ids` picks how completion ids are returned:
    "field" (vLLM's return_token_ids), "strings" (token_id:N) or "none" (text only)."""

    def __init__(self, engine, key: str | None = None):
        import http.server
        import threading

        self.engine, self.key, self.token_ids, self.fail_next = engine, key, "field", 0
        self.requests: list[dict] = []
        lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, obj: dict):
                import json

                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/v1/models":
                    return self._send(200, {"data": [{"id": "served-tiny", "max_model_len": 2048}]})
                self._send(404, {"error": "no such path"})

            def do_POST(self):
                import json

                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if outer.key and self.headers.get("Authorization") != f"Bearer {outer.key}":
                    return self._send(401, {"error": "bad key"})
                with lock:
                    outer.requests.append(body)
                    if outer.fail_next:
                        outer.fail_next -= 1
                        return self._send(503, {"error": "busy"})
                    s = Sampling(
                        temperature=body["temperature"],
                        top_p=body["top_p"],
                        max_tokens=body["max_tokens"],
                        seed=body.get("seed"),
                        stop=body.get("stop") or [],
                    )
                    if self.path == "/v1/completions":
                        g = outer.engine.generate([body["prompt"]], s)[0]
                        return self._send(200, {"choices": [outer._completion_choice(g, s)]})
                    if self.path == "/v1/chat/completions":
                        g = outer.engine.chat([body["messages"]], s, tools=body.get("tools"))[0]
                        content = [{"token": "x", "logprob": x} for x in g.logprobs]
                        return self._send(
                            200,
                            {
                                "choices": [
                                    {
                                        "message": {"role": "assistant", "content": g.text},
                                        "logprobs": {"content": content},
                                        "finish_reason": g.finish_reason,
                                    }
                                ]
                            },
                        )
                self._send(404, {"error": "no such path"})

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def _completion_choice(self, g, s):
        tok = self.engine.tokenizer
        choice = {
            "text": g.text,
            "finish_reason": g.finish_reason,
            "stop_reason": None,
            "logprobs": {
                "token_logprobs": g.logprobs,
                "tokens": [tok.decode([i]) for i in g.completion_ids],
            },
        }
        if g.finish_reason == "stop" and s.stop and g.completion_ids[-1:] != [tok.eos_token_id]:
            choice["stop_reason"] = s.stop[0]
        if self.token_ids == "field":
            choice["token_ids"] = g.completion_ids
        elif self.token_ids == "strings":
            choice["logprobs"]["tokens"] = [f"token_id:{i}" for i in g.completion_ids]
        return choice

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def server(hf):
    srv = _Server(hf, key="test-key")
    yield srv
    srv.close()


def test_openai_completions_matches_backing_engine(server, hf, tiny_model, monkeypatch):
    monkeypatch.delenv("SPADE_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    eng = load_engine("served-tiny", "openai", base_url=server.url, tokenizer=str(tiny_model))
    assert eng.name == "openai" and eng.max_model_len == 2048  # read from /v1/models
    samplings = [Sampling(max_tokens=10, seed=s) for s in (1, 2, 3)]
    for mode in ("field", "strings"):
        server.token_ids = mode
        gens = eng.chat(CONVS, samplings)
        want = [hf.generate([hf.chat_ids(c)], s)[0] for c, s in zip(CONVS, samplings, strict=True)]
        assert [g.to_dict() for g in gens] == [w.to_dict() for w in want]
    body = server.requests[-1]
    assert (
        isinstance(body["prompt"], list)
        and body["model"] == "served-tiny"
        and body["seed"] in (1, 2, 3)
    )


def test_openai_text_only_server_tokenizes_locally(server, hf, tiny_model, monkeypatch):
    monkeypatch.setenv("SPADE_API_KEY", "test-key")
    eng = load_engine(
        str(tiny_model), "openai", base_url=server.url + "/v1", served_model="served-tiny"
    )
    server.token_ids = "none"
    s = Sampling(max_tokens=6, temperature=0)
    g = eng.chat(CONVS[:1], s)[0]
    want = hf.chat(CONVS[:1], s)[0]
    assert g.text == want.text and g.prompt_ids == want.prompt_ids
    assert g.completion_ids == list(hf.tokenizer.encode(want.text, add_special_tokens=False))
    assert g.logprobs is None or len(g.logprobs) == len(g.completion_ids)
    server.token_ids = "field"


def test_openai_chat_api_retries_and_auth(server, hf, tiny_model, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("SPADE_API_KEY", "test-key")
    eng = load_engine(
        str(tiny_model), "openai", base_url=server.url, served_model="served-tiny", api="chat"
    )
    server.fail_next = 1  # one 503, then the retry succeeds
    s = Sampling(max_tokens=8, temperature=0)
    g = eng.chat(CONVS[:1], s)[0]
    assert g.text == hf.chat(CONVS[:1], s)[0].text
    assert "messages" in server.requests[-1] and server.requests[-2]["messages"] == CONVS[0]
    monkeypatch.setenv("SPADE_API_KEY", "wrong")
    bad = load_engine(
        str(tiny_model), "openai", base_url=server.url, served_model="served-tiny", retries=0
    )
    with pytest.raises(ResourceError, match="HTTP 401"):
        bad.generate([[1, 2, 3]], s)


def test_openai_unreachable_and_missing_url(tiny_model, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(UsageError):
        load_engine(str(tiny_model), "openai")
    eng = load_engine(
        str(tiny_model), "openai", base_url="http://127.0.0.1:9", retries=0, timeout=5
    )
    with pytest.raises(ResourceError, match="cannot reach"):
        eng.generate([[1, 2, 3]], Sampling(max_tokens=2))


# --------------------------------------------------------------------------- vLLM


@pytest.mark.gpu
def test_vllm_engine_on_tiny_model(tiny_model):
    pytest.importorskip("vllm")
    eng = load_engine(str(tiny_model), "vllm", gpu_memory_utilization=0.3, enforce_eager=True)
    try:
        s = Sampling(max_tokens=16, seed=5)
        gens = eng.chat(CONVS, s)
        for conv, g in zip(CONVS, gens, strict=True):
            check_generation(eng, g, eng.chat_ids(conv), s)
        again = eng.chat(CONVS, s)
        assert [g.completion_ids for g in gens] == [g.completion_ids for g in again]
        # Per-request seeds: a request's output does not depend on its batch mates.
        alone = eng.chat(CONVS[:1], s)[0]
        assert alone.completion_ids == gens[0].completion_ids
        greedy = eng.chat(CONVS, Sampling(temperature=0, max_tokens=8))
        ref = load_engine(str(tiny_model), "hf", device="cpu").chat(
            CONVS, Sampling(temperature=0, max_tokens=8)
        )
        assert [g.prompt_ids for g in greedy] == [g.prompt_ids for g in ref]
    finally:
        eng.close()
