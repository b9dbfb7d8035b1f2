"""Find the key on one of five shelves with tools, take it, then say you are done.

Tools: look(shelf) describes a shelf, take(shelf) takes what lies there. Calls are
<tool_call>{"name": ..., "arguments": {...}}</tool_call>; the episode ends with
<answer>done</answer>.
"""

import json
import random
import re


class ShelfSearch:
    def __init__(self, max_turns=10):
        self.max_turns = max_turns
        self.key_shelf = 0
        self.has_key = False
        self.looked = set()
        self.turn = 0

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.key_shelf = rng.randint(1, 5)
        self.has_key = False
        self.looked = set()
        self.turn = 0
        return ("Five shelves, numbered 1 to 5; a key lies on one. Tools: look(shelf), "
                "take(shelf). Call them as <tool_call>{\"name\": \"look\", \"arguments\": "
                "{\"shelf\": 1}}</tool_call>, and finish with <answer>done</answer>."), {}

    def step(self, action):
        self.turn += 1
        truncated = self.turn >= self.max_turns
        text = action or ""
        if re.search(r"<answer>\s*done\s*</answer>", text):
            # As published, the final step's reward is the episode's return.
            reward = 1.0 if self.has_key else 0.0
            return "You leave the room.", reward, True, False, {}
        m = re.search(r"<tool_call>(.*?)</tool_call>", text, re.DOTALL)
        if not m:
            return "Use a <tool_call> or <answer>done</answer>.", 0.0, False, truncated, {}
        try:
            call = json.loads(m.group(1))
            name, shelf = call["name"], int(call["arguments"]["shelf"])
        except (ValueError, KeyError, TypeError):
            return "That tool call is malformed.", 0.0, False, truncated, {}
        if not 1 <= shelf <= 5:
            return f"There is no shelf {shelf}.", 0.0, False, truncated, {}
        if name == "look":
            self.looked.add(shelf)
            what = "a small brass key" if shelf == self.key_shelf else "dust"
            return f"Shelf {shelf}: {what}.", 0.0, False, truncated, {}
        if name == "take":
            if shelf == self.key_shelf and not self.has_key:
                self.has_key = True
                return "You take the key.", 0.2, False, truncated, {}
            return f"Nothing to take from shelf {shelf}.", 0.0, False, truncated, {}
        return f"Unknown tool {name!r}.", 0.0, False, truncated, {}

    def solution(self):
        call = json.dumps({"name": "take", "arguments": {"shelf": self.key_shelf}})
        return f"<tool_call>{call}</tool_call> <answer>done</answer>"
