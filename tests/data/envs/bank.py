import json

import gymnasium as gym

TOOLS = [
    {"type": "function", "function": {"name": "balance", "description": "Balance of an account",
     "parameters": {"type": "object", "properties": {"account": {"type": "string"}}, "required": ["account"]}}},
    {"type": "function", "function": {"name": "transfer", "description": "Move money",
     "parameters": {"type": "object", "properties": {"src": {"type": "string"}, "dst": {"type": "string"},
                    "amount": {"type": "number"}}, "required": ["src", "dst", "amount"]}}},
]


class BankTransfer(gym.Env):
    """Tool use: move money so that savings holds exactly the requested amount."""

    metadata = {"name": "bank-transfer", "max_turns": 6, "tools": TOOLS}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.accounts = {"checking": 500 + (seed or 0) % 300, "savings": 100}
        self.goal = 250 + (seed or 0) % 50
        need = self.goal - self.accounts["savings"]
        sol = [json.dumps({"name": "transfer", "arguments": {"src": "checking", "dst": "savings", "amount": need}})]
        obs = f"Make the savings account hold exactly {self.goal}."
        return obs, {"hint": "Check the savings balance first, then transfer the difference.", "solution": sol}

    def step(self, action):
        try:
            call = json.loads(action)
            name, args = call["name"], call.get("arguments", {})
        except (ValueError, KeyError, TypeError):
            return "Call a tool.", 0.0, False, False, {}
        if name == "balance":
            return str(self.accounts.get(args.get("account"), "no such account")), 0.0, False, False, {}
        if name == "transfer":
            amt = args.get("amount", 0)
            if self.accounts.get(args.get("src"), 0) < amt:
                return "Insufficient funds.", 0.0, True, False, {}
            self.accounts[args["src"]] -= amt
            self.accounts[args["dst"]] = self.accounts.get(args["dst"], 0) + amt
            ok = self.accounts["savings"] == self.goal
            return ("Done." if ok else "Transferred."), float(ok), ok, False, {}
        return "Unknown tool.", 0.0, False, False, {}
