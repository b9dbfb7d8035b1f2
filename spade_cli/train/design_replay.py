"""Design replay (`--design-replay C`): the designer's own valid answers rehearsed in each
optimizer step, so the agent's steps do not wear the shared model's designs away.

One model plays both roles. An agent step moves weights the designer's answers use too;
in the micro world, after a few rounds of agent steps the closing code fence of a design
gives way to an action word ("left", "s") and the answer no longer parses
(docs/evidence.md). With C > 0 each optimizer step adds C times the cross-entropy of one
valid design drawn from the run's own inputs (behaviour cloning of the prompt's answer,
the loss on the answer's tokens only), the way PPO-ptx mixes pretraining batches into
RLHF steps. Replayed designs carry no reward: which design to write stays the designer
step's business, and every replayed answer already passed validation.

What it costs: cloning the model's own designs also sharpens its choices. In the micro
world it kept every design well formed, but the levels narrowed under shuffled designer
rewards as under the real ones, and the agent, trained on fewer distinct environments,
gained less (docs/evidence.md). So the designs can come from elsewhere
(`--design-replay-from`): the loop's `loop.replayed_designs = "first-round"` replays round
1's, which the starting model wrote, a fixed set that does not follow the trained model's
choices. Not in the published recipe: a named option, off by default. The loop gives it
to the agent's steps only.
"""

from __future__ import annotations

import random
from typing import Any

from ..logs import log
from ..recordio import RecordReader
from .samples import refusal


def valid_designs(inputs: list[str]) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, answer ids) of each design in `inputs` that passed validation and was
    not refused by a rollout, once each, in input order."""
    seen: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
    out = []
    for rec in RecordReader(inputs, kind="candidate"):
        design = rec.get("design")
        validation = rec.get("validation")
        if not isinstance(design, dict) or not isinstance(validation, dict):
            continue
        if validation.get("valid") is not True or refusal(rec) is not None:
            continue
        prompt, answer = design.get("prompt_ids"), design.get("completion_ids")
        if not (_token_ids(prompt) and _token_ids(answer)):
            continue
        key = (tuple(prompt), tuple(answer))
        if key not in seen:
            seen.add(key)
            out.append((list(prompt), list(answer)))
    return out


def _token_ids(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(t, int) for t in value)


class DesignReplay:
    """Draws one design per call (seeded) and returns its answer's mean token loss."""

    def __init__(self, designs: list[tuple[list[int], list[int]]], coef: float, seed: int):
        if not designs:
            raise ValueError("design replay needs at least one valid design")
        self.designs, self.coef = designs, coef
        self._rng = random.Random(f"design-replay:{seed}")

    def loss(self, model: Any):
        """Cross-entropy of a drawn design's answer given its prompt. One sequence, so no
        padding; the output head runs on the answer's positions only (`logits_to_keep`),
        the prompt's costing just the layers."""
        import torch
        import torch.nn.functional as F

        prompt, answer = self.designs[self._rng.randrange(len(self.designs))]
        device = next(model.parameters()).device
        ids = torch.tensor([prompt + answer], device=device)
        # The logits at the last prompt position and at each answer position but the last
        # predict the answer's tokens.
        logits = model(input_ids=ids, logits_to_keep=len(answer) + 1).logits[0, :-1]
        target = torch.tensor(answer, device=device)
        return F.cross_entropy(logits.float(), target)


def design_replay_for(coef: float, sources: list[str], seed: int) -> DesignReplay | None:
    """The replay a run with --design-replay COEF trains with, or None (off, or no valid
    design in `sources`: its inputs, or the files of --design-replay-from)."""
    if coef <= 0:
        return None
    designs = valid_designs(sources)
    if not designs:
        log.warning(
            "--design-replay: no valid design in %s; training without replay", ", ".join(sources)
        )
        return None
    log.info("design replay: %d valid designs, coefficient %g", len(designs), coef)
    return DesignReplay(designs, coef, seed)
