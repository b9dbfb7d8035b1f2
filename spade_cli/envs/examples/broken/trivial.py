"""Is the number prime? Every question happens to have the answer 'yes'."""

import random

import gymnasium as gym

PRIMES = [101, 103, 107, 109, 113, 127, 131, 137, 139, 149, 151, 157]


class IsPrime(gym.Env):
    metadata = {"name": "is_prime", "max_turns": 1}

    def reset(self, seed=None, options=None):
        rng = random.Random(seed)
        self.n = rng.choice(PRIMES)
        return f"Is {self.n} a prime number? Answer yes or no.", {
            "hint": "Try dividing by the primes up to its square root.", "solution": ["yes"]}

    def step(self, action):
        ok = action.strip().lower() == "yes"
        return "Done.", float(ok), True, False, {}
