# ruff: noqa: F821, UP006, UP035 - the release's style: injected names, typing.Tuple
"""A multi-step tool-use task in the release's BFCL-like form: a ToolUseBaseEnv subclass
whose instructions arrive one at a time (_user_messages / _current_msg), each tool result
announcing the next; <answer>done</answer> wins once every step is complete. Written
against `from tool_use_base_env import ToolUseBaseEnv`, which the loader also provides."""

import random

from tool_use_base_env import ToolUseBaseEnv

TEAMS = ["billing", "network", "accounts", "hardware", "security"]


class TicketWorkflowEnv(ToolUseBaseEnv):
    def reset(self, seed=None):
        self.turn_count = 0
        self._call_history = []
        if seed is not None:
            random.seed(seed)
        ids = random.sample(range(100, 999), 4)
        self._state = {"tickets": {str(i): {"team": "triage", "status": "open"} for i in ids}}
        self._ticket = str(random.choice(ids))
        self._team = random.choice(TEAMS)
        self._tools = {
            "list_tickets": {"description": "Ids of the open tickets",
                             "parameters": {"type": "object", "properties": {}}},
            "assign": {"description": "Assign a ticket to a team",
                       "parameters": {"type": "object",
                                      "properties": {"ticket": {"type": "string"},
                                                     "team": {"type": "string"}},
                                      "required": ["ticket", "team"]}},
            "close": {"description": "Close a ticket",
                      "parameters": {"type": "object",
                                     "properties": {"ticket": {"type": "string"}},
                                     "required": ["ticket"]}},
        }
        self._user_messages = [
            f"Ticket {self._ticket} belongs to the {self._team} team: assign it there.",
            f"The {self._team} team fixed it: close ticket {self._ticket}.",
        ]
        self._criteria = [
            lambda s: s["tickets"][self._ticket]["team"] == self._team,
            lambda s: s["tickets"][self._ticket]["status"] == "closed",
        ]
        self._current_msg = 0
        self._expected_answer = "done"
        return self._user_messages[0], {}

    def _advance(self) -> str:
        if self._current_msg < len(self._criteria) and self._criteria[self._current_msg](self._state):
            self._current_msg += 1
            if self._current_msg == len(self._user_messages):
                return "\n\n[ALL STEPS COMPLETE] Submit <answer>done</answer>."
            return f"\n\n[STEP {self._current_msg} COMPLETE] {self._user_messages[self._current_msg]}"
        return ""

    def _check_answer(self, answer):
        return answer.strip().lower() == "done" and self._current_msg == len(self._user_messages)

    def tool_list_tickets(self):
        return ", ".join(sorted(t for t, v in self._state["tickets"].items() if v["status"] == "open"))

    def tool_assign(self, ticket="", team=""):
        if ticket not in self._state["tickets"]:
            return f"Error: no ticket {ticket}" + self._advance()
        if self._current_msg > 0 and ticket == self._ticket:
            return "Error: this ticket is already assigned" + self._advance()
        self._state["tickets"][ticket]["team"] = team
        return f"Ticket {ticket} assigned to {team}" + self._advance()

    def tool_close(self, ticket=""):
        if ticket not in self._state["tickets"]:
            return f"Error: no ticket {ticket}" + self._advance()
        if self._state["tickets"][ticket]["team"] == "triage":
            return "Error: assign the ticket before closing it" + self._advance()
        self._state["tickets"][ticket]["status"] = "closed"
        return f"Ticket {ticket} closed" + self._advance()

    def solution(self):
        assign = {"name": "assign", "arguments": {"ticket": self._ticket, "team": self._team}}
        close = {"name": "close", "arguments": {"ticket": self._ticket}}
        return (f"<tool_call>{json.dumps(assign)}</tool_call> "
                f"<tool_call>{json.dumps(close)}</tool_call> <answer>done</answer>")
