# ruff: noqa: F821, UP006, UP035 - the release's style: injected names, typing.Tuple
"""A tool-use environment in the release's form: a ToolUseBaseEnv subclass (the loader
injects the base; this file neither imports nor defines it). Look up an item's stock and
its supplier's price, order what is missing, and answer the order's total cost."""

import random
from typing import Tuple

ITEMS = ["bolts", "nuts", "washers", "hinges", "brackets", "rivets", "springs", "clamps"]


class WarehouseRestockEnv(ToolUseBaseEnv):
    def reset(self, seed=None) -> Tuple[str, dict]:
        self.turn_count = 0
        self._call_history = []
        if seed is not None:
            random.seed(seed)
        chosen = random.sample(ITEMS, 4)
        self._state = {
            "stock": {name: random.randint(0, 40) for name in chosen},
            "price": {name: random.randint(2, 19) for name in chosen},
            "orders": [],
        }
        self._target = random.choice(chosen)
        self._needed = 50
        self._tools = {
            "list_items": {"description": "Names of the items in the warehouse",
                           "parameters": {"type": "object", "properties": {}}},
            "get_stock": {"description": "Units of an item in stock",
                          "parameters": {"type": "object",
                                         "properties": {"item": {"type": "string"}},
                                         "required": ["item"]}},
            "get_price": {"description": "The supplier's unit price of an item",
                          "parameters": {"type": "object",
                                         "properties": {"item": {"type": "string"}},
                                         "required": ["item"]}},
            "place_order": {"description": "Order units of an item; returns the order's cost",
                            "parameters": {"type": "object",
                                           "properties": {"item": {"type": "string"},
                                                          "units": {"type": "integer"}},
                                           "required": ["item", "units"]}},
        }
        missing = self._needed - self._state["stock"][self._target]
        self._expected_answer = str(missing * self._state["price"][self._target])
        return (f"TASK: bring the stock of {self._target} up to exactly {self._needed} units by "
                "ordering what is missing, then submit the order's total cost with "
                "<answer>COST</answer>."), {}

    def _check_answer(self, answer: str) -> bool:
        missing = self._needed - self._state["stock"][self._target]
        ordered = [o for o in self._state["orders"] if o[0] == self._target]
        return ordered == [(self._target, missing)] and super()._check_answer(answer)

    def tool_list_items(self) -> str:
        return ", ".join(sorted(self._state["stock"]))

    def tool_get_stock(self, item="") -> str:
        if item not in self._state["stock"]:
            return f"Error: no item {item!r}"
        return str(self._state["stock"][item])

    def tool_get_price(self, item="") -> str:
        if item not in self._state["price"]:
            return f"Error: no item {item!r}"
        return str(self._state["price"][item])

    def tool_place_order(self, item="", units=0) -> str:
        if item not in self._state["stock"]:
            return f"Error: no item {item!r}"
        units = int(units)
        if units <= 0:
            return "Error: units must be positive"
        self._state["orders"].append((item, units))
        return f"Ordered {units} {item} for {units * self._state['price'][item]}"

    def solution(self) -> str:
        missing = self._needed - self._state["stock"][self._target]
        order = {"name": "place_order", "arguments": {"item": self._target, "units": missing}}
        stock = {"name": "get_stock", "arguments": {"item": self._target}}
        return (f"<tool_call>{json.dumps(stock)}</tool_call> "
                f"<tool_call>{json.dumps(order)}</tool_call> "
                f"<answer>{self._expected_answer}</answer>")
