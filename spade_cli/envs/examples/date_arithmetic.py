"""Calendar arithmetic: which date is N days (or weeks and days) before or after a given date.

Family: single-answer reasoning
"""

import datetime
import random
import re

import gymnasium as gym


def _add_months(d, months):
    y, m = divmod(d.month - 1 + months, 12)
    y, m = d.year + y, m + 1
    last = (datetime.date(y + (m == 12), m % 12 + 1, 1) - datetime.timedelta(days=1)).day
    return datetime.date(y, m, min(d.day, last))


class DateArithmetic(gym.Env):
    metadata = {"name": "date_arithmetic", "max_turns": 1}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        start = datetime.date(1995, 1, 1) + datetime.timedelta(days=rng.randint(0, 365 * 40))
        days = rng.randint(45, 700)
        sign = rng.choice([1, -1])
        target = start + datetime.timedelta(days=sign * days)
        if rng.random() < 0.5:
            span = f"{days // 7} weeks and {days % 7} days"
        else:
            span = f"{days} days"
        direction = "after" if sign > 0 else "before"
        obs = (f"Which date is {span} {direction} {start.strftime('%A, %d %B %Y')}? "
               f"Answer in the form YYYY-MM-DD.")
        # The hint is a waypoint: the same day of the month a whole number of months away,
        # never the target itself.
        months = 0
        while True:
            nxt = _add_months(start, sign * (months + 1))
            if (nxt - target).days * sign >= 0:
                break
            months += 1
        way = _add_months(start, sign * months)
        if months == 0 or way == target:
            way = _add_months(start, sign * max(months - 1, 1))
        gap = abs((way - start).days)
        hint = (f"{way.isoformat()} is exactly {gap} days {direction} the start date; "
                f"count the remaining days from there.")
        self._target = target
        self._done = False
        return obs, {"hint": hint, "solution": [target.isoformat()]}

    def step(self, action):
        if self._done:
            return "The episode is over.", 0.0, True, False, {}
        self._done = True
        found = re.findall(r"(\d{4})-(\d{1,2})-(\d{1,2})", str(action))
        if found:
            try:
                if datetime.date(*map(int, found[-1])) == self._target:
                    return "Correct.", 1.0, True, False, {}
            except ValueError:
                pass
        return "Incorrect.", 0.0, True, False, {}
