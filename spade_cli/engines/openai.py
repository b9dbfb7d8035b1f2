"""OpenAI-compatible HTTP engine: a model served elsewhere (vLLM, SGLang, llama.cpp
server, a hosted API), spoken to with the standard library only.

Two ways to talk to the server (`api=`):

- "completions" (default): POST /v1/completions with the prompt as a list of token
  ids, rendered locally with the model's chat template (so prompts are exactly the
  ids training will see). vLLM, SGLang and llama.cpp accept token-id prompts. The
  completion's ids come from the server when it returns them (vLLM: `token_ids` with
  `return_token_ids`, or `token_id:N` strings with `return_tokens_as_token_ids`), and
  only otherwise from tokenising the returned text locally (then they can differ from
  what the server sampled; logprobs are kept only when their count matches).
- "chat": POST /v1/chat/completions with the messages, for hosted APIs that take no
  token prompts. The server renders its own template; prompt and completion ids are
  the local tokenizer's rendering of the same messages and answer. Tool calls the
  server returns parsed (`message.tool_calls`) are written back into the text in the
  model's native `<tool_call>` format so `parse_tool_calls` sees them. `generate`
  (token prompts) in this mode sends the decoded prompt text to /v1/completions.

The tokenizer is loaded locally from `tokenizer=` or the model path. The API key comes
from `api_key=`, else SPADE_API_KEY, else OPENAI_API_KEY; no key sends no
Authorization header (a local vLLM needs none). Requests run concurrently
(`max_concurrency`) and are retried with backoff on connection errors, 429 and 5xx.
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from ..errors import ResourceError, UsageError
from .base import Engine, Generation, Sampling, _tools_per_conversation, as_list, first_line

log = logging.getLogger("spade")

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


class OpenAIEngine(Engine):
    name = "openai"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        tokenizer: str | None = None,
        served_model: str | None = None,
        api: str = "completions",
        timeout: float = 600.0,
        max_concurrency: int = 16,
        max_model_len: int | None = None,
        retries: int = 3,
        **_ignored,
    ):
        from transformers import AutoTokenizer

        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not base_url:
            raise UsageError("engine openai needs --base-url (or OPENAI_BASE_URL)")
        if api not in ("completions", "chat"):
            raise UsageError(f"engine openai: api must be 'completions' or 'chat', got {api!r}")
        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.api_key = (
            api_key or os.environ.get("SPADE_API_KEY") or os.environ.get("OPENAI_API_KEY")
        )
        self.api = api
        self.served_model = served_model or model
        self.timeout = float(timeout)
        self.max_concurrency = max(1, int(max_concurrency))
        self.retries = max(0, int(retries))
        try:
            tok = AutoTokenizer.from_pretrained(tokenizer or model)
        except (OSError, ValueError) as e:
            raise ResourceError(
                f"engine openai needs the model's tokenizer locally (--tokenizer PATH): {first_line(e)}"
            ) from None
        super().__init__(model, tok, max_model_len or self._server_context() or None)

    # ------------------------------------------------------------------ HTTP

    def _request(self, path: str, body: dict | None = None) -> dict:
        url = self.base_url + path
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        delay = 1.0
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(
                url, data=data, headers=headers, method="GET" if body is None else "POST"
            )
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.loads(resp.read())
            except urllib.error.HTTPError as e:
                detail = " ".join(e.read()[:300].decode(errors="replace").split())
                if e.code not in RETRY_STATUS or attempt == self.retries:
                    raise ResourceError(
                        f"engine openai: HTTP {e.code} from {url}: {detail}"
                    ) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
                if attempt == self.retries:
                    raise ResourceError(
                        f"engine openai: cannot reach {url}: {first_line(e)}"
                    ) from None
            log.debug("openai: retrying %s in %.0fs", url, delay)
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def _server_context(self) -> int | None:
        """vLLM lists `max_model_len` under /v1/models; other servers may not."""
        try:
            saved, self.retries = self.retries, 0
            models = self._request("/models").get("data", [])
        except Exception:  # noqa: BLE001 - optional information
            return None
        finally:
            self.retries = saved
        for m in models:
            if m.get("id") == self.served_model and isinstance(m.get("max_model_len"), int):
                return m["max_model_len"]
        return None

    def _map(self, fn, items: list) -> list:
        if len(items) <= 1 or self.max_concurrency == 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(min(self.max_concurrency, len(items))) as pool:
            return list(pool.map(fn, items))

    # ------------------------------------------------------------------ generation

    def _common(self, s: Sampling, max_tokens: int) -> dict:
        body = {
            "model": self.served_model,
            "max_tokens": max_tokens,
            "temperature": float(s.temperature),
            "top_p": float(s.top_p),
        }
        if s.seed is not None:
            body["seed"] = int(s.seed)
        if s.stop:
            body["stop"] = list(s.stop)
        return body

    def generate(
        self, prompts: list[list[int]], sampling: Sampling | list[Sampling]
    ) -> list[Generation]:
        samplings = as_list(sampling, len(prompts))
        return self._map(
            lambda ps: self._complete(list(ps[0]), ps[1]),
            list(zip(prompts, samplings, strict=True)),
        )

    def _complete(self, prompt: list[int], s: Sampling) -> Generation:
        room = self.max_model_len - len(prompt)
        if room <= 0 or s.max_tokens <= 0:
            return Generation("", prompt, [], [], "length" if s.max_tokens <= 0 else "context")
        body = self._common(s, min(s.max_tokens, room))
        if self.api == "completions":
            body.update(
                prompt=prompt, logprobs=0, return_token_ids=True, return_tokens_as_token_ids=True
            )
        else:
            body.update(prompt=self.tokenizer.decode(prompt), logprobs=0)
        choice = self._request("/completions", body)["choices"][0]
        text = choice.get("text") or ""
        lp = choice.get("logprobs") or {}
        ids = choice.get("token_ids")
        if ids is None:
            toks = lp.get("tokens") or []
            if toks and all(isinstance(t, str) and t.startswith("token_id:") for t in toks):
                ids = [int(t.split(":", 1)[1]) for t in toks]
            else:
                ids = self._local_ids(text, choice)
        logprobs = lp.get("token_logprobs")
        if logprobs is not None and len(logprobs) != len(ids):
            logprobs = None
        reason = "length" if choice.get("finish_reason") == "length" else "stop"
        return Generation(text, prompt, list(ids), _floats(logprobs), reason)

    def _local_ids(self, text: str, choice: dict) -> list[int]:
        ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        # Ended by the end-of-turn token (not a stop string, not the length limit):
        # keep that token, as the other engines do.
        if (
            choice.get("finish_reason") in ("stop", "tool_calls")
            and choice.get("stop_reason") is None
            and self.tokenizer.eos_token_id is not None
        ):
            ids.append(int(self.tokenizer.eos_token_id))
        return ids

    def chat(
        self, conversations: list[list[dict]], sampling: Sampling | list[Sampling], tools=None
    ) -> list[Generation]:
        if self.api == "completions":
            return super().chat(conversations, sampling, tools)
        samplings = as_list(sampling, len(conversations))
        per_conv = _tools_per_conversation(tools, len(conversations))
        jobs = list(zip(conversations, samplings, per_conv, strict=True))
        return self._map(lambda job: self._chat_one(*job), jobs)

    def _chat_one(self, messages: list[dict], s: Sampling, tools) -> Generation:
        prompt = self.chat_ids(messages, tools)
        room = self.max_model_len - len(prompt)
        if room <= 0 or s.max_tokens <= 0:
            return Generation("", prompt, [], [], "length" if s.max_tokens <= 0 else "context")
        body = self._common(s, min(s.max_tokens, room))
        body.update(messages=messages, logprobs=True)
        if tools:
            body["tools"] = tools
        choice = self._request("/chat/completions", body)["choices"][0]
        msg = choice.get("message") or {}
        text = msg.get("content") or ""
        for call in msg.get("tool_calls") or []:
            fn = call.get("function", call)
            args = fn.get("arguments", {})
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    pass
            call_json = json.dumps({"name": fn.get("name"), "arguments": args}, ensure_ascii=False)
            text += ("\n" if text else "") + f"<tool_call>\n{call_json}\n</tool_call>"
        ids = self._local_ids(text, choice)
        content = (choice.get("logprobs") or {}).get("content") or []
        logprobs = [c.get("logprob") for c in content] if content else None
        if logprobs is not None and len(logprobs) != len(ids):
            logprobs = None
        reason = "length" if choice.get("finish_reason") == "length" else "stop"
        return Generation(text, prompt, ids, _floats(logprobs), reason)


def _floats(xs) -> list[float] | None:
    if xs is None:
        return None
    return [float(x) if x is not None else 0.0 for x in xs]
