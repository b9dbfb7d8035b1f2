"""Buy the right product through a shop API: filter by rating and stock, apply a coupon, check out.

Family: stateful tool use
"""

import json
import random

import gymnasium as gym

TOOLS = [
    {"type": "function", "function": {
        "name": "search", "description": "List the products of a category with id, name, price, rating and stock.",
        "parameters": {"type": "object", "properties": {"category": {"type": "string"}},
                       "required": ["category"]}}},
    {"type": "function", "function": {
        "name": "add_to_cart", "description": "Put a quantity of a product in the cart.",
        "parameters": {"type": "object", "properties": {"product_id": {"type": "string"}, "quantity": {"type": "integer"}},
                       "required": ["product_id", "quantity"]}}},
    {"type": "function", "function": {
        "name": "remove_from_cart", "description": "Remove a product from the cart.",
        "parameters": {"type": "object", "properties": {"product_id": {"type": "string"}},
                       "required": ["product_id"]}}},
    {"type": "function", "function": {
        "name": "apply_coupon", "description": "Apply a coupon code to the cart.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}},
                       "required": ["code"]}}},
    {"type": "function", "function": {
        "name": "checkout", "description": "Pay for the cart; this ends the session.",
        "parameters": {"type": "object", "properties": {},
                       "required": []}}},
]

CATALOG = {
    "kettles": ["SteelBoil", "QuickPot", "TeaMate", "AquaHeat", "BrewKing", "HotSpring"],
    "headphones": ["BassPro", "QuietOne", "EarLite", "SoundWave", "TuneX", "PulseBuds"],
    "backpacks": ["TrailPack", "CityBag", "NomadGo", "UrbanCarry", "PeakSack", "DayHauler"],
    "lamps": ["GlowDesk", "LumaArc", "BrightNook", "ReadLite", "SunBeam", "NightOwl"],
}


def call(name, **arguments):
    return json.dumps({"name": name, "arguments": arguments})


class ShopApi(gym.Env):
    metadata = {"name": "shop_api", "max_turns": 12, "tools": TOOLS}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        self._products = {}
        for cat, names in CATALOG.items():
            for i, name in enumerate(names):
                self._products[f"{cat[0].upper()}{rng.randint(100, 999)}{i}"] = {
                    "category": cat, "name": name, "price": rng.randint(15, 250),
                    "rating": round(rng.uniform(2.5, 5.0), 1), "stock": rng.randint(0, 6)}
        while True:
            cat, qty = rng.choice(sorted(CATALOG)), rng.randint(2, 3)
            min_rating = rng.choice([3.5, 4.0, 4.5])
            good = [p for p, v in self._products.items() if v["category"] == cat
                    and v["rating"] >= min_rating and v["stock"] >= qty]
            cheapest = min(v["price"] for v in self._products.values() if v["category"] == cat)
            if good:
                target = min(good, key=lambda p: (self._products[p]["price"], p))
                # The plain cheapest product must be a trap, or the filter would not matter.
                if self._products[target]["price"] > cheapest:
                    break
            for p in self._products:
                if self._products[p]["category"] == cat:
                    self._products[p]["stock"] = rng.randint(0, 6)
        self._code = f"{cat[:4].upper()}{rng.randint(10, 40)}"
        self._target, self._qty = target, qty
        self._cart, self._coupon, self._turns = {}, None, 0
        obs = (f"Buy {qty} units of the cheapest product in the '{cat}' category that has a "
               f"rating of at least {min_rating} and at least {qty} in stock. Apply coupon "
               f"{self._code}, then check out. The cart must hold nothing else.")
        hint = f"The product you want costs {self._products[target]['price']} per unit."
        solution = [call("add_to_cart", product_id=target, quantity=qty),
                    call("apply_coupon", code=self._code), call("checkout")]
        return obs, {"hint": hint, "solution": solution}

    def _run(self, name, args):
        if name == "search":
            cat = str(args.get("category", "")).lower()
            rows = [{"id": p, **{k: v[k] for k in ("name", "price", "rating", "stock")}}
                    for p, v in sorted(self._products.items()) if v["category"] == cat]
            return json.dumps(rows) if rows else f"error: no category {cat!r}"
        if name == "add_to_cart":
            pid = str(args.get("product_id", ""))
            try:
                qty = int(args.get("quantity", 1))
            except (TypeError, ValueError):
                return "error: quantity must be an integer"
            if pid not in self._products or qty < 1:
                return "error: unknown product or bad quantity"
            if self._cart.get(pid, 0) + qty > self._products[pid]["stock"]:
                return "error: not enough stock"
            self._cart[pid] = self._cart.get(pid, 0) + qty
            return f"cart: {json.dumps(self._cart)}"
        if name == "remove_from_cart":
            self._cart.pop(str(args.get("product_id", "")), None)
            return f"cart: {json.dumps(self._cart)}"
        if name == "apply_coupon":
            if str(args.get("code", "")) != self._code:
                return "error: invalid coupon"
            self._coupon = self._code
            return "coupon applied: 10% off"
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
        if name == "checkout":
            ok = self._cart == {self._target: self._qty} and self._coupon == self._code
            return ("Order placed." if ok else "Order placed, but it is not what was asked.",
                    1.0 if ok else 0.0, True, False, {})
        return self._run(name, args), 0.0, False, self._turns >= self.metadata["max_turns"], {}
