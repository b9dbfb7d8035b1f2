"""The spade-design stage: designer prompts and candidate records.

A prompt template is one text file with a `=== system ===` and a `=== user ===` part
(the default is `prompts/design.md`; `--prompt FILE` replaces it). Placeholders:

    {{contract}}   the environment contract (prompts/contract.md)
    {{document}}   the grounding document, excerpted to the budget
    {{source}}     where the document came from (file name / source name)
    {{exemplars}}  full code of a few environments chosen from memory
    {{listing}}    one line per environment that already exists
    {{round}}      the round number
    {{skill}}      the target skill with its description (skills.py), empty without one
    {{difficulty}} easy, medium or hard, empty without one
    {{steps}}      interaction steps the difficulty asks for (2 on easy, else 3)
    {{avoid}}      one line naming an environment that was too easy or too hard

`{{#name}}...{{/name}}` keeps its body only when `name` is non-empty, and
`{{^name}}...{{/name}}` only when it is empty (so `--no-doc` and `--no-memory` drop whole
paragraphs). Values are inserted once and never re-scanned, so code and documents may
contain braces freely.

Budget: the document is first cut to `doc_tokens` tokens (at a line or sentence end
when one is near). If the whole prompt (chat template applied) still exceeds
`max_prompt_tokens`, exemplars are dropped (last chosen first), then the listing is
halved down to a few lines, then the document is shortened (to no less than 16
tokens); a prompt that cannot fit even so is a usage error. Exemplars are never truncated: half a module would teach
broken code.

Records: with `doc_per_design` (the default, as published) each doc yields one design,
and the designs of one skill in a round share a group (the designer's baseline is its
skill's mean); otherwise each doc yields one GRPO group of `num_designs` candidates
sharing one prompt. The attempt (the doc) picks the skill and difficulty (skills.py) and
seeds the exemplar choice with (seed, round, doc id). Ids are stable: doc group =
hash(doc id, round, seed); candidate = hash(doc group, index); the sampling seed of
design i is `seed_for(seed, "design", f"{doc group}:{i}")`, so reruns and shards
reproduce the same designs on engines that honour seeds. Memory policies: see memory.py
(published: exemplars of the skill cut to `exemplar_chars`, an avoid line, no listing;
diverse: whole exemplars and a listing).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .engines import Engine, Sampling
from .errors import UsageError
from .records import make_id, new_record, seed_for
from .stage_settings import DesignSettings

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
PLACEHOLDERS = (
    "contract",
    "document",
    "source",
    "exemplars",
    "listing",
    "round",
    "skill",
    "difficulty",
    "steps",
    "avoid",
)
_SECTION = re.compile(r"\{\{([#^])(\w+)\}\}\n?(.*?)\{\{/\2\}\}\n?", re.DOTALL)
_FIELD = re.compile(r"\{\{(\w+)\}\}")
_MARK = re.compile(r"^=== (system|user) ===[ \t]*$", re.MULTILINE)


@dataclass
class Template:
    system: str
    user: str
    path: str

    @classmethod
    def load(cls, path: str | Path | None = None) -> Template:
        """A template file, or the name of a shipped one (`micro`: prompts/design_micro.md)."""
        shipped = PROMPTS_DIR / f"design_{path}.md" if path and str(path).isidentifier() else None
        p = (
            shipped
            if shipped is not None and shipped.is_file()
            else Path(path)
            if path
            else PROMPTS_DIR / "design.md"
        )
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"--prompt {p}: {e.strerror or e}") from None
        parts = _MARK.split(text)
        # split gives [before, name, body, name, body, ...]
        named = {parts[i]: parts[i + 1].strip("\n") for i in range(1, len(parts) - 1, 2)}
        if "user" not in named:
            raise UsageError(
                f"--prompt {p}: needs a line '=== user ===' (and optionally '=== system ===')"
            )
        for name in _FIELD.findall(text) + [m[1] for m in _SECTION.findall(text)]:
            if name not in PLACEHOLDERS:
                raise UsageError(
                    f"--prompt {p}: unknown placeholder {{{{{name}}}}} "
                    f"(known: {', '.join(PLACEHOLDERS)})"
                )
        return cls(named.get("system", ""), named["user"], str(p))


def render(text: str, values: dict[str, str]) -> str:
    def section(m: re.Match) -> str:
        present = bool(values.get(m[2]))
        return m[3] if present == (m[1] == "#") else ""

    text = _SECTION.sub(section, text)
    return _FIELD.sub(lambda m: str(values.get(m[1], "")), text)


CONTRACT_FILES = {"spade": "contract.md", "published": "contract_published.md"}


def load_contract(contract: str = "spade") -> str:
    """The contract text the designer is given: ours, or the published form's."""
    return (PROMPTS_DIR / CONTRACT_FILES[contract]).read_text(encoding="utf-8").strip()


# --------------------------------------------------------------------------- pieces


def excerpt(text: str, max_tokens: int, tokenizer) -> str:
    """The start of `text` within `max_tokens` tokens, ending at a line or sentence end
    when one lies in the last fifth; a cut document ends with a `[…]` line."""
    if max_tokens <= 0:
        return ""
    # Cheap pre-cut so a 10 MB document is never tokenised whole (a token is rarely
    # more than 16 characters).
    head = text[: max_tokens * 16 + 1]
    ids = tokenizer.encode(head, add_special_tokens=False)
    if len(ids) <= max_tokens and len(head) == len(text):
        return text
    cut = tokenizer.decode(ids[:max_tokens])
    # A cut through a multi-byte character decodes to U+FFFD: drop it.
    cut = cut.rstrip("\ufffd")
    floor = int(len(cut) * 0.8)
    for sep in ("\n", ". ", "? ", "! "):
        i = cut.rfind(sep)
        if i >= floor:
            cut = cut[: i + len(sep)]
            break
    return cut.rstrip() + "\n[…]"


def format_exemplars(entries: list[dict], chars: int = 0) -> str:
    from .memory import cut_code

    blocks = []
    for i, e in enumerate(entries, 1):
        title = e.get("name") or e.get("id") or f"example {i}"
        summary = e.get("summary") or ""
        head = f"### Example {i}: {title}" + (f" — {summary}" if summary else "")
        blocks.append(f"{head}\n```python\n{cut_code(e['code'], chars).rstrip()}\n```")
    return "\n\n".join(blocks)


def doc_source(doc: dict) -> str:
    src = doc.get("source") or {}
    if isinstance(src, dict):
        return str(src.get("name") or src.get("path") or doc.get("id") or "")
    return str(src)


# --------------------------------------------------------------------------- prompt


@dataclass
class DesignPrompt:
    messages: list[dict]
    ids: list[int]
    doc_text: str | None
    exemplars: list[str]


def build_prompt(
    engine: Engine,
    template: Template,
    contract: str,
    doc: dict | None,
    exemplars: list[dict],
    listing_text: str,
    round_: int,
    doc_tokens: int,
    max_prompt_tokens: int,
    extra: dict[str, str] | None = None,
    exemplar_chars: int = 0,
) -> DesignPrompt:
    """The designer's messages for one document, fitted to `max_prompt_tokens`; `extra`
    fills the skill, difficulty, steps and avoid placeholders."""
    doc_text = excerpt(doc["text"], doc_tokens, engine.tokenizer) if doc is not None else None
    exemplars = list(exemplars)
    listing_lines = listing_text.splitlines() if listing_text else []
    while True:
        values = {
            "contract": contract,
            "document": doc_text or "",
            "source": doc_source(doc) if doc is not None else "",
            "exemplars": format_exemplars(exemplars, exemplar_chars),
            "listing": "\n".join(listing_lines),
            "round": str(round_),
            **(extra or {}),
        }
        messages = []
        system = render(template.system, values).strip()
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": render(template.user, values).strip()})
        ids = engine.chat_ids(messages)
        over = len(ids) - max_prompt_tokens
        if over <= 0:
            return DesignPrompt(
                messages, ids, doc_text, [e.get("name") or e.get("id") for e in exemplars]
            )
        if exemplars:
            exemplars.pop()
        elif len(listing_lines) > 4:
            listing_lines = listing_lines[: len(listing_lines) // 2]
        elif doc_text:
            have = len(engine.tokenizer.encode(doc_text, add_special_tokens=False))
            want = have - over - 8
            if want < 16:
                raise UsageError(
                    f"no room for the document in --max-prompt-tokens {max_prompt_tokens} "
                    f"(the rest of the prompt takes {len(ids) - have} tokens)"
                )
            doc_text = excerpt(doc["text"], want, engine.tokenizer)
        else:
            raise UsageError(
                f"the designer prompt needs {len(ids)} tokens even without document and exemplars; "
                f"raise --max-prompt-tokens (now {max_prompt_tokens}) or shorten the template"
            )


# --------------------------------------------------------------------------- stage


def prompt_budget(settings: DesignSettings, engine: Engine) -> int:
    room = engine.max_model_len - settings.sampling.max_tokens
    budget = settings.max_prompt_tokens or room
    if budget > room:
        raise UsageError(
            f"--max-prompt-tokens {budget} + --max-tokens {settings.sampling.max_tokens} "
            f"exceed the model's context of {engine.max_model_len} tokens"
        )
    if budget < 64:
        raise UsageError(
            f"no room for a prompt: the model's context is {engine.max_model_len} "
            f"tokens and --max-tokens is {settings.sampling.max_tokens}"
        )
    return budget


def design_records(
    docs: Iterable[dict],
    engine: Engine,
    settings: DesignSettings,
    memory: list[dict] | None = None,
    template: Template | None = None,
    *,
    seed: int = 0,
    round: int = 0,
    attempt: int = 1,
    stand_ins: dict[str, dict] | None = None,
) -> Iterator[dict]:
    """Candidate records, `designs_per_doc` per doc, in input order. `memory` holds the env
    entries exemplars and the listing come from (ignored with `no_memory`). A later
    `attempt` (a document whose earlier designs all failed validation) keeps the group,
    so its designs join the same GRPO group, with their own ids and sampling seeds.
    `stand_ins` (doc id -> another doc, filled at the latest as `docs` yields that id):
    the prompt shows the stand-in's text instead, as the release gives every attempt a
    fresh document; skill, difficulty, group and ids stay the original document's, and
    the record's `doc` names the one shown."""
    from .memory import listing

    template = template or Template.load()
    contract = load_contract(settings.contract)
    entries = [] if settings.no_memory else list(memory or [])
    diverse = settings.memory_policy == "diverse"
    listing_text = listing(entries, limit=settings.listing_limit) if entries and diverse else ""
    budget = prompt_budget(settings, engine)
    base = settings.sampling

    def designs(batch: list[dict]) -> Iterator[dict]:
        return _design_batch(
            batch,
            engine,
            settings,
            base,
            template,
            contract,
            entries,
            listing_text,
            budget,
            seed,
            round,
            attempt,
            stand_ins,
        )

    batch: list[dict] = []
    for doc in docs:
        batch.append(doc)
        if len(batch) >= settings.batch_docs:
            yield from designs(batch)
            batch = []
    if batch:
        yield from designs(batch)


def _nth(attempt: int, i: int) -> int | str:
    """Design i of an attempt: attempt 1 keeps the plain index (ids as before)."""
    return i if attempt == 1 else f"{attempt}:{i}"


def _design_batch(
    docs,
    engine,
    settings,
    base,
    template,
    contract,
    entries,
    listing_text,
    budget,
    seed,
    round,
    attempt=1,
    stand_ins=None,
):
    from . import memory, skills

    active = skills.active_skills(
        skills.resolve(settings.skill_set, settings.skills), settings.skills_per_round, round
    )
    convs, samplings, meta = [], [], []
    for doc in docs:
        doc_group = make_id("group", doc["id"], round, seed)
        skill, level = skills.pick(active, settings.difficulty, seed, round, doc["id"])
        pick_seed = seed_for(seed, "exemplars", f"{round}:{doc['id']}")
        extra = {
            "skill": skill.prompt_text() if skill else "",
            "difficulty": level or "",
            "steps": str(skills.min_steps(level)),
        }
        if settings.memory_policy == "published":
            chosen = memory.select_published(
                entries, skill.name if skill else None, settings.exemplars, pick_seed
            )
            extra["avoid"] = memory.avoid_line(
                memory.avoid_entry(entries, skill.name if skill else None, pick_seed)
            )
            chars = settings.exemplar_chars
        else:
            chosen = memory.select_exemplars(
                entries, settings.exemplars, seed=seed_for(seed, "exemplars", doc["id"])
            )
            chars = 0
        shown = (stand_ins or {}).get(doc["id"], doc)
        prompt = build_prompt(
            engine,
            template,
            contract,
            None if settings.no_doc else shown,
            chosen,
            listing_text,
            round,
            settings.doc_tokens,
            budget,
            extra,
            chars,
        )
        if settings.doc_per_design:
            group = make_id("group", "skill", skill.name if skill else "", round, seed)
            count = 1
        else:
            group, count = doc_group, settings.designs_per_doc
        for i in range(count):
            s = Sampling(
                temperature=base.temperature,
                top_p=base.top_p,
                max_tokens=base.max_tokens,
                seed=seed_for(seed, "design", f"{doc_group}:{_nth(attempt, i)}"),
                stop=list(base.stop),
            )
            convs.append(prompt.messages)
            samplings.append(s)
            meta.append((doc, shown, doc_group, group, i, prompt, skill, level))
    gens = engine.chat(convs, samplings)
    for (doc, shown, doc_group, group, i, prompt, skill, level), s, g in zip(
        meta, samplings, gens, strict=True
    ):
        doc_field = None
        if not settings.no_doc:
            doc_field = {
                "id": shown["id"],
                "text": prompt.doc_text,
                "source": shown.get("source"),
                "chars": len(shown["text"]),
            }
            if shown is not doc:
                doc_field["stands_in_for"] = doc["id"]
        yield new_record(
            "candidate",
            make_id("cand", doc_group, _nth(attempt, i)),
            [doc["id"]],
            origin="design",
            round=round,
            group=group,
            doc=doc_field,
            skill=skill.name if skill else None,
            difficulty=level,
            design={
                "messages": prompt.messages,
                "text": g.text,
                "prompt_ids": g.prompt_ids,
                "completion_ids": g.completion_ids,
                "logprobs": g.logprobs,
                "finish_reason": g.finish_reason,
                "engine": engine.name,
                "model": engine.model,
                "sampling": s.to_dict(),
                "attempt": attempt,
                "index": i,
                "exemplars": prompt.exemplars,
            },
        )
