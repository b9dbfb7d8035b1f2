"""Pay the right bills through a small banking API, topping up checking from savings first.

Family: stateful tool use
"""

import datetime
import json
import random

import gymnasium as gym

TOOLS = [
    {"type": "function", "function": {
        "name": "list_bills", "description": "List all bills with id, payee, amount, due date and status.",
        "parameters": {"type": "object", "properties": {},
                       "required": []}}},
    {"type": "function", "function": {
        "name": "get_balance", "description": "Balance of an account ('checking' or 'savings').",
        "parameters": {"type": "object", "properties": {"account": {"type": "string"}},
                       "required": ["account"]}}},
    {"type": "function", "function": {
        "name": "transfer", "description": "Move money between your own accounts.",
        "parameters": {"type": "object", "properties": {"from_account": {"type": "string"}, "to_account": {"type": "string"}, "amount": {"type": "number"}},
                       "required": ["from_account", "to_account", "amount"]}}},
    {"type": "function", "function": {
        "name": "pay_bill", "description": "Pay a bill in full from an account.",
        "parameters": {"type": "object", "properties": {"bill_id": {"type": "string"}, "account": {"type": "string"}},
                       "required": ["bill_id", "account"]}}},
    {"type": "function", "function": {
        "name": "finish", "description": "Declare the task complete.",
        "parameters": {"type": "object", "properties": {},
                       "required": []}}},
]

PAYEES = ["City Power", "AquaWorks", "NetFast", "Metro Gas", "PhoneCo", "Insurer Ltd",
          "Gym Club", "StreamBox", "Landlord", "Car Loan"]


def call(name, **arguments):
    return json.dumps({"name": name, "arguments": arguments})


class BankApi(gym.Env):
    metadata = {"name": "bank_api", "max_turns": 20, "tools": TOOLS}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        today = datetime.date(2024, 1, 1) + datetime.timedelta(days=rng.randint(0, 300))
        cutoff = today + datetime.timedelta(days=rng.randint(5, 12))
        self._bills = {}
        for i, payee in enumerate(rng.sample(PAYEES, rng.randint(5, 7))):
            due = today + datetime.timedelta(days=rng.randint(-3, 25))
            status = "paid" if rng.random() < 0.25 else "unpaid"
            self._bills[f"B{100 + i}"] = {"payee": payee, "amount": rng.randint(20, 400),
                                          "due": due.isoformat(), "status": status}
        todo = sorted(b for b, v in self._bills.items()
                      if v["status"] == "unpaid" and v["due"] <= cutoff.isoformat())
        if len(todo) < 2:  # make sure there is real work: two unpaid bills due in time
            for b in sorted(self._bills)[:2]:
                self._bills[b].update(status="unpaid", due=today.isoformat())
            todo = sorted(b for b, v in self._bills.items()
                          if v["status"] == "unpaid" and v["due"] <= cutoff.isoformat())
        total = sum(self._bills[b]["amount"] for b in todo)
        self._bal = {"checking": rng.randint(10, max(11, total - 15)),
                     "savings": total + rng.randint(200, 2000)}
        shortfall = max(0, total - self._bal["checking"])
        self._todo, self._shortfall = set(todo), shortfall
        self._start = dict(self._bal)
        self._turns = 0
        obs = (f"Today is {today.isoformat()}. Pay every unpaid bill due on or before "
               f"{cutoff.isoformat()} from the checking account, and no other bill. If checking "
               f"cannot cover them, first transfer exactly the shortfall from savings to "
               f"checking (not a cent more). Call finish when you are done.")
        hint = (f"{len(todo)} bills qualify; together they cost {total}, and checking holds "
                f"{self._bal['checking']}.")
        solution = []
        if shortfall:
            solution.append(call("transfer", from_account="savings", to_account="checking",
                                 amount=shortfall))
        solution += [call("pay_bill", bill_id=b, account="checking") for b in todo]
        solution.append(call("finish"))
        return obs, {"hint": hint, "solution": solution}

    def _run(self, name, args):
        if name == "list_bills":
            return json.dumps([{"id": b, **v} for b, v in sorted(self._bills.items())])
        if name == "get_balance":
            acct = str(args.get("account", ""))
            return str(self._bal[acct]) if acct in self._bal else f"error: no account {acct}"
        if name == "transfer":
            src, dst = str(args.get("from_account")), str(args.get("to_account"))
            try:
                amount = float(args.get("amount"))
            except (TypeError, ValueError):
                return "error: amount must be a number"
            if src not in self._bal or dst not in self._bal or src == dst or amount <= 0:
                return "error: bad transfer"
            if self._bal[src] < amount:
                return "error: insufficient funds"
            self._bal[src] -= amount
            self._bal[dst] += amount
            return f"transferred {amount:g} from {src} to {dst}"
        if name == "pay_bill":
            bill, acct = self._bills.get(str(args.get("bill_id"))), str(args.get("account"))
            if bill is None or acct not in self._bal:
                return "error: unknown bill or account"
            if bill["status"] == "paid":
                return "error: bill already paid"
            if self._bal[acct] < bill["amount"]:
                return "error: insufficient funds"
            self._bal[acct] -= bill["amount"]
            bill["status"] = "paid"
            bill["paid_from"] = acct
            return f"paid {bill['payee']}"
        return f"error: unknown tool {name}"

    def step(self, action):
        self._turns += 1
        try:
            msg = json.loads(action)
            name, args = msg["name"], msg.get("arguments") or {}
            if isinstance(args, str):
                args = json.loads(args)
            assert isinstance(args, dict)
        except Exception:
            return ('error: send a tool call as JSON {"name": ..., "arguments": {...}}', 0.0,
                    False, self._turns >= self.metadata["max_turns"], {})
        if name == "finish":
            paid_now = {b for b, v in self._bills.items() if v.get("paid_from")}
            ok = (paid_now == self._todo
                  and all(self._bills[b]["paid_from"] == "checking" for b in paid_now)
                  and abs(self._start["savings"] - self._bal["savings"] - self._shortfall) < 1e-6)
            return ("All done." if ok else "That is not what was asked.", 1.0 if ok else 0.0,
                    True, False, {})
        return self._run(name, args), 0.0, False, self._turns >= self.metadata["max_turns"], {}
