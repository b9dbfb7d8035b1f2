"""Arithmetic word problems: a short story with three chained operations; answer one integer.

Family: single-answer reasoning
"""

import random
import re

import gymnasium as gym

ITEMS = ["pencil", "apple", "candle", "battery", "notebook", "marble", "sticker", "cookie"]
PEOPLE = ["Amara", "Bilal", "Chen", "Dana", "Elif", "Farid", "Greta", "Hugo"]


def _bags(rng):
    item = rng.choice(ITEMS)
    boxes, per_box = rng.randint(3, 12), rng.randint(6, 24)
    total = boxes * per_box
    mon, tue = rng.randint(5, total // 4), rng.randint(5, total // 4)
    bag = rng.randint(3, 9)
    answer = (total - mon - tue) // bag
    text = (
        f"A shop receives {boxes} boxes of {item}s with {per_box} {item}s in each box. "
        f"It sells {mon} {item}s on Monday and {tue} on Tuesday, then packs the rest into "
        f"bags of {bag}. How many full bags can it make?"
    )
    return text, answer, f"The shop starts with {total} {item}s."


def _savings(rng):
    who = rng.choice(PEOPLE)
    price = rng.randint(120, 900)
    saved = rng.randint(10, price // 3)
    weekly = rng.randint(7, 40)
    spend = rng.randint(1, weekly // 2)
    net = weekly - spend
    missing = price - saved
    answer = -(-missing // net)
    text = (
        f"{who} wants a bike that costs ${price} and has already saved ${saved}. Every week "
        f"{who} earns ${weekly} and spends ${spend} of it on snacks, saving the rest. After how "
        f"many whole weeks will {who} have enough money for the first time?"
    )
    return text, answer, f"{who} saves ${net} per week and still needs ${missing}."


def _train(rng):
    v, t1 = rng.randint(40, 120), rng.randint(2, 5)
    w = rng.choice([30, 45, 60, 90, 120])
    minutes = rng.choice([20, 40, 60, 80, 100, 120])
    second = w * minutes // 60
    back = rng.randint(10, 60)
    answer = v * t1 + second - back
    text = (
        f"A train travels at {v} km/h for {t1} hours, then at {w} km/h for {minutes} minutes. "
        f"It then has to reverse {back} km to reach the platform. How far from its starting "
        f"point, in km, does it stop?"
    )
    return text, answer, f"The second leg of the trip is {second} km long."


class ArithmeticWordProblem(gym.Env):
    metadata = {"name": "arithmetic_word_problem", "max_turns": 1}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        while True:
            text, answer, hint = rng.choice([_bags, _savings, _train])(rng)
            shown = {int(n) for n in re.findall(r"\d+", text)}
            # Keep the answer out of the story so copying a number from it never wins.
            if answer > 1 and answer not in shown and str(answer) not in re.findall(r"\d+", hint):
                break
        self._answer = answer
        self._done = False
        obs = text + " Answer with a single integer."
        return obs, {"hint": hint, "solution": [str(answer)]}

    def step(self, action):
        if self._done:
            return "The episode is over.", 0.0, True, False, {}
        self._done = True
        numbers = re.findall(r"-?\d+", str(action).replace(",", ""))
        if numbers and int(numbers[-1]) == self._answer:
            return "Correct.", 1.0, True, False, {}
        return "Incorrect.", 0.0, True, False, {}
