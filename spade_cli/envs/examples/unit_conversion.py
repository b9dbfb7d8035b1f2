"""Unit conversions that chain two or three factors; answer a number within 1%.

Family: single-answer reasoning
"""

import random
import re

import gymnasium as gym


def _speed(rng):
    mph = rng.randint(12, 95)
    value = mph * 1609.344 / 3600
    return (f"A cyclist's top speed is {mph} miles per hour. What is that in metres per second?",
            value, "1 mile is 1609.344 metres and 1 hour is 3600 seconds.")


def _fuel(rng):
    mpg = rng.randint(18, 62)
    value = 100 * 3.785411784 / (mpg * 1.609344)
    return (f"A car does {mpg} miles per US gallon. What is its consumption in litres per 100 km?",
            value, "1 US gallon is 3.785 litres and 1 mile is 1.609 km; litres per 100 km is "
            "100 divided by km per litre.")


def _cooking(rng):
    cups = rng.choice([1.5, 2, 2.5, 3, 3.5, 4, 5, 6])
    tbsp = rng.randint(2, 9)
    value = cups * 236.588 + tbsp * 14.787
    return (f"A recipe needs {cups} US cups of milk plus {tbsp} tablespoons of cream. How many "
            f"millilitres of liquid is that in total?", value,
            "1 US cup is about 236.6 mL and 1 tablespoon is about 14.8 mL.")


def _area(rng):
    acres = rng.randint(3, 80)
    value = acres * 4046.856 / 10000
    return (f"A farm has {acres} acres of orchards. How many hectares is that?", value,
            "1 acre is 4046.86 square metres and 1 hectare is 10000 square metres.")


def _temperature(rng):
    f = rng.randint(-20, 110)
    value = (f - 32) * 5 / 9 + 273.15
    return (f"A weather station logs {f} degrees Fahrenheit. What is "
            f"that in kelvin?", value, "Subtract 32 and multiply by 5/9 to get Celsius first.")


class UnitConversion(gym.Env):
    metadata = {"name": "unit_conversion", "max_turns": 1}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        while True:
            question, value, hint = rng.choice([_speed, _fuel, _cooking, _area, _temperature])(rng)
            shown = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", question)]
            if value > 2 and all(abs(x - value) > 0.02 * value for x in shown):
                break
        self._value = value
        self._done = False
        obs = question + " Answer with one number (one decimal place is enough; 1% tolerance)."
        return obs, {"hint": hint, "solution": [f"{value:.2f}"]}

    def step(self, action):
        if self._done:
            return "The episode is over.", 0.0, True, False, {}
        self._done = True
        numbers = re.findall(r"-?\d+(?:\.\d+)?", str(action).replace(",", ""))
        if numbers and abs(float(numbers[-1]) - self._value) <= 0.01 * abs(self._value):
            return "Correct.", 1.0, True, False, {}
        return "Incorrect.", 0.0, True, False, {}
