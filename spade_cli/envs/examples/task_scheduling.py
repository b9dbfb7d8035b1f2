"""Order jobs on one machine so that every job meets its deadline and its prerequisites.

Family: multi-step planning
"""

import random
import re

import gymnasium as gym

JOBS = ["survey", "design", "order", "build", "wire", "paint", "inspect", "clean", "test",
        "package", "ship", "audit"]


def _edf(jobs):
    """Earliest deadline first among the jobs whose prerequisites are done."""
    done, order, t = set(), [], 0
    while len(done) < len(jobs):
        ready = [j for j in jobs if j not in done and jobs[j]["after"] <= done]
        j = min(ready, key=lambda j: (jobs[j]["due"], j))
        t += jobs[j]["time"]
        if t > jobs[j]["due"]:
            return None
        done.add(j)
        order.append(j)
    return order


def _feasible(jobs, order):
    t, done = 0, set()
    for j in order:
        if not jobs[j]["after"] <= done:
            return False
        t += jobs[j]["time"]
        if t > jobs[j]["due"]:
            return False
        done.add(j)
    return True


class TaskScheduling(gym.Env):
    metadata = {"name": "task_scheduling", "max_turns": 10}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        while True:
            names = rng.sample(JOBS, rng.randint(5, 7))
            plan = names[:]
            rng.shuffle(plan)
            jobs = {}
            for i, j in enumerate(plan):
                earlier = plan[:i]
                after = set(rng.sample(earlier, min(len(earlier), rng.choice([0, 0, 1, 1, 2]))))
                jobs[j] = {"time": 0, "due": 0, "after": after}
            t = 0
            for j in plan:
                jobs[j]["time"] = rng.randint(1, 6)
                t += jobs[j]["time"]
                jobs[j]["due"] = t + rng.choice([0, 0, 1, 2, 4])
            order = _edf(jobs)
            # Reject instances that listing order or alphabetical order already solve.
            if order and not _feasible(jobs, names) and not _feasible(jobs, sorted(names)):
                break
        self._jobs, self._names = jobs, names
        self._done, self._t, self._turns = [], 0, 0
        lines = []
        for j in names:
            req = ", ".join(sorted(jobs[j]["after"])) or "nothing"
            lines.append(f"- {j}: takes {jobs[j]['time']} h, must finish by hour "
                         f"{jobs[j]['due']}, needs {req} done first")
        self._intro = ("One machine runs one job at a time, starting at hour 0. Run every job "
                       "so that each finishes by its deadline and only after its "
                       "prerequisites.\n" + "\n".join(lines))
        hint = ("Among the jobs whose prerequisites are done, always run the one with the "
                "earliest deadline next.")
        return self._render("Reply with the name of the job to run next."), {
            "hint": hint, "solution": order}

    def _render(self, message):
        return (f"{self._intro}\nDone so far: {', '.join(self._done) or 'nothing'} "
                f"(hour {self._t}). {message}")

    def step(self, action):
        self._turns += 1
        words = re.findall(r"[a-z]+", str(action).lower())
        job = next((w for w in words if w in self._jobs), None)
        truncated = self._turns >= self.metadata["max_turns"]
        if job is None or job in self._done:
            return self._render("That is not a job still to run."), 0.0, False, truncated, {}
        if not self._jobs[job]["after"] <= set(self._done):
            return self._render(f"{job} still has unfinished prerequisites."), 0.0, False, truncated, {}
        self._t += self._jobs[job]["time"]
        self._done.append(job)
        if self._t > self._jobs[job]["due"]:
            return self._render(f"{job} finished late at hour {self._t}. You failed."), 0.0, True, False, {}
        if len(self._done) == len(self._jobs):
            return self._render("All jobs finished on time!"), 1.0, True, False, {}
        return self._render(f"{job} finished at hour {self._t}."), 0.0, False, truncated, {}
