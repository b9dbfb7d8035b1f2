"""Tidy a small virtual file system through tool calls: find a file by content, copy it, clean up.

Family: stateful tool use
"""

import json
import random

import gymnasium as gym

TOOLS = [
    {"type": "function", "function": {
        "name": "list_dir", "description": "List the entries of a directory.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "read_file", "description": "Return the text of a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "copy_file", "description": "Copy a file to a new path (the directory must exist).",
        "parameters": {"type": "object", "properties": {"src": {"type": "string"},
                                                         "dst": {"type": "string"}},
                       "required": ["src", "dst"]}}},
    {"type": "function", "function": {
        "name": "delete_file", "description": "Delete a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "finish", "description": "Declare the task complete.",
        "parameters": {"type": "object", "properties": {}}}},
]

USERS = ["maria", "kofi", "lena", "tariq", "yuki"]
STEMS = ["report", "notes", "draft", "summary", "memo", "budget", "minutes", "letter", "plan"]
TOPICS = ["the roof repair", "the spring fair", "server upgrades", "the parking rota",
          "the new printer", "team lunch", "the audit", "office plants"]


def call(name, **arguments):
    return json.dumps({"name": name, "arguments": arguments})


class FileSystem(gym.Env):
    metadata = {"name": "file_system", "max_turns": 25, "tools": TOOLS}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        user = rng.choice(USERS)
        home = f"/home/{user}"
        self._dirs = {"/", "/home", home, "/shared", f"{home}/tmp"}
        self._files = {}
        numbers = rng.sample(range(1000, 9999), 12)
        folders = rng.sample(["docs", "notes", "mail", "projects", "archive"], 3)
        for d in folders:
            self._dirs.add(f"{home}/{d}")
        for i, number in enumerate(numbers[:9]):
            d = f"{home}/{folders[i % 3]}"
            name = f"{rng.choice(STEMS)}_{i + 1}.txt"
            self._files[f"{d}/{name}"] = (f"About {rng.choice(TOPICS)}. Reference: order "
                                          f"{number}. Keep until the end of the year.")
        self._target = sorted(p for p in self._files)[rng.randrange(9)]
        order = self._files[self._target].split("order ")[1].split(".")[0]
        self._junk = []
        for i in range(rng.randint(2, 4)):
            p = f"{home}/tmp/{rng.choice(STEMS)}_{i}.bak"
            self._files[p] = "stale backup"
            self._junk.append(p)
        keep = f"{home}/tmp/todo_{rng.randint(1, 9)}.txt"
        self._files[keep] = "call the plumber"
        self._dest = f"/shared/order_{order}.txt"
        self._initial = dict(self._files)
        self._turns = 0
        obs = (f"You are logged in as {user} (home {home}). Find the file that mentions order "
               f"{order} and copy it to {self._dest}. Then delete every file ending in .bak in "
               f"{home}/tmp, and nothing else. Call finish when you are done.")
        where = self._target.rsplit("/", 1)[0]
        hint = f"The file about order {order} is somewhere in {where}."
        solution = [call("copy_file", src=self._target, dst=self._dest)]
        solution += [call("delete_file", path=p) for p in sorted(self._junk)]
        solution.append(call("finish"))
        return obs, {"hint": hint, "solution": solution}

    def _run(self, name, args):
        path = str(args.get("path", ""))
        if name == "list_dir":
            if path.rstrip("/") not in self._dirs and path != "/":
                return f"error: no such directory: {path}"
            base = path.rstrip("/") + "/"
            kids = {p[len(base):].split("/")[0] for p in self._dirs | set(self._files)
                    if p.startswith(base) and p != base.rstrip("/")}
            return "\n".join(sorted(kids)) or "(empty)"
        if name == "read_file":
            return self._files.get(path, f"error: no such file: {path}")
        if name == "copy_file":
            src, dst = str(args.get("src", "")), str(args.get("dst", ""))
            if src not in self._files:
                return f"error: no such file: {src}"
            if dst.rsplit("/", 1)[0] not in self._dirs:
                return f"error: no such directory for {dst}"
            self._files[dst] = self._files[src]
            return f"copied {src} to {dst}"
        if name == "delete_file":
            if path not in self._files:
                return f"error: no such file: {path}"
            del self._files[path]
            return f"deleted {path}"
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
            expected = {p: t for p, t in self._initial.items() if p not in self._junk}
            expected[self._dest] = self._initial[self._target]
            ok = self._files == expected
            return ("Task complete." if ok else "The file system is not in the requested state.",
                    1.0 if ok else 0.0, True, False, {})
        result = self._run(name, args)
        return result, 0.0, False, self._turns >= self.metadata["max_turns"], {}
