"""Prime factorisation; reset() forgets to return the info dict."""

import random

import gymnasium as gym


class PrimeFactors(gym.Env):
    metadata = {"name": "prime_factors", "max_turns": 1}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.factors = sorted(rng.choice([2, 3, 5, 7, 11, 13]) for _ in range(4))
        n = 1
        for f in self.factors:
            n *= f
        return f"Factor {n} into primes, smallest first, separated by spaces."

    def step(self, action):
        ok = action.split() == [str(f) for f in self.factors]
        return "Done.", float(ok), True, False, {}
