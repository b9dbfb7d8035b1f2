"""Manage a calendar through tools: cancel one meeting and book another in the earliest free slot.

Family: stateful tool use
"""

import datetime
import json
import random

import gymnasium as gym

TOOLS = [
    {"type": "function", "function": {
        "name": "list_events", "description": "Events of one day (date as YYYY-MM-DD) with id, title, start, end.",
        "parameters": {"type": "object", "properties": {"date": {"type": "string"}},
                       "required": ["date"]}}},
    {"type": "function", "function": {
        "name": "create_event", "description": "Create an event; times are HH:MM (24 h).",
        "parameters": {"type": "object", "properties": {"title": {"type": "string"}, "date": {"type": "string"}, "start": {"type": "string"}, "end": {"type": "string"}},
                       "required": ["title", "date", "start", "end"]}}},
    {"type": "function", "function": {
        "name": "delete_event", "description": "Delete an event by id.",
        "parameters": {"type": "object", "properties": {"event_id": {"type": "string"}},
                       "required": ["event_id"]}}},
    {"type": "function", "function": {
        "name": "finish", "description": "Declare the task complete.",
        "parameters": {"type": "object", "properties": {},
                       "required": []}}},
]

TITLES = ["Standup", "Design review", "1:1 with Sam", "Budget sync", "Vendor call",
          "Hiring panel", "Lunch talk", "Retro", "Roadmap", "Client demo", "Code review"]


def _hm(minutes):
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _parse_hm(text):
    h, m = str(text).split(":")
    return int(h) * 60 + int(m)


def call(name, **arguments):
    return json.dumps({"name": name, "arguments": arguments})


class CalendarBooking(gym.Env):
    metadata = {"name": "calendar_booking", "max_turns": 12, "tools": TOOLS}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        monday = datetime.date(2025, 1, 6) + datetime.timedelta(weeks=rng.randint(0, 40))
        days = [(monday + datetime.timedelta(days=i)).isoformat() for i in range(5)]
        while True:
            self._events, n = {}, 0
            for day in days:
                t = 9 * 60 if day == days[2] else rng.choice([9 * 60, 9 * 60 + 30, 10 * 60])
                for _ in range(rng.randint(2, 5)):
                    length = rng.choice([30, 30, 60, 60, 90])
                    if t + length > 17 * 60:
                        break
                    n += 1
                    self._events[f"E{n:02d}"] = {"title": rng.choice(TITLES), "date": day,
                                                 "start": _hm(t), "end": _hm(t + length)}
                    t += length + rng.choice([0, 0, 30, 60, 90])
            book_day, cancel_day = days[2], rng.choice(days)
            cancel = sorted(e for e, v in self._events.items() if v["date"] == cancel_day)
            dur = rng.choice([60, 90, 120])
            if not cancel:
                continue
            self._cancel = rng.choice(cancel)
            busy = sorted((_parse_hm(v["start"]), _parse_hm(v["end"]))
                          for e, v in self._events.items()
                          if v["date"] == book_day and e != self._cancel)
            t, before = 9 * 60, None
            for s, e in busy:
                if s - t >= dur:
                    break
                t, before = max(t, e), (s, e)
            if t + dur <= 17 * 60 and before is not None:
                break
        self._slot = (book_day, _hm(t), _hm(t + dur))
        self._title = f"Project kickoff {rng.randint(2, 99)}"
        self._initial = {e: dict(v) for e, v in self._events.items()}
        self._turns, n = 0, len(self._events)
        self._next = n + 1
        c = self._events[self._cancel]
        obs = (f"Cancel the '{c['title']}' meeting on {c['date']} at {c['start']}. Then book "
               f"'{self._title}' for {dur} minutes on {book_day} at the earliest time between "
               f"09:00 and 17:00 that overlaps no other event (after the cancellation). Call "
               f"finish when done.")
        prev_event = next(v for v in self._events.values()
                          if v["date"] == book_day and _parse_hm(v["end"]) == before[1])
        hint = (f"On {book_day} the first gap long enough opens when '{prev_event['title']}' "
                f"ends.")
        solution = [call("delete_event", event_id=self._cancel),
                    call("create_event", title=self._title, date=book_day, start=_hm(t),
                         end=_hm(t + dur)),
                    call("finish")]
        return obs, {"hint": hint, "solution": solution}

    def _run(self, name, args):
        if name == "list_events":
            day = str(args.get("date", ""))
            rows = [{"id": e, **v} for e, v in sorted(self._events.items()) if v["date"] == day]
            return json.dumps(rows) if rows else "no events"
        if name == "delete_event":
            if self._events.pop(str(args.get("event_id", "")), None) is None:
                return "error: no such event"
            return "deleted"
        if name == "create_event":
            try:
                start, end = _parse_hm(args["start"]), _parse_hm(args["end"])
                datetime.date.fromisoformat(str(args["date"]))
            except Exception:
                return "error: need title, date YYYY-MM-DD, start and end HH:MM"
            if end <= start:
                return "error: end must be after start"
            eid = f"E{self._next:02d}"
            self._next += 1
            self._events[eid] = {"title": str(args.get("title", "")), "date": str(args["date"]),
                                 "start": _hm(start), "end": _hm(end)}
            return f"created {eid}"
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
            expected = {e: v for e, v in self._initial.items() if e != self._cancel}
            kept = {e: v for e, v in self._events.items() if e in self._initial}
            new = [v for e, v in self._events.items() if e not in self._initial]
            want = {"title": self._title, "date": self._slot[0], "start": self._slot[1],
                    "end": self._slot[2]}
            ok = kept == expected and new == [want]
            return ("Calendar updated." if ok else "The calendar is not as requested.",
                    1.0 if ok else 0.0, True, False, {})
        return self._run(name, args), 0.0, False, self._turns >= self.metadata["max_turns"], {}
