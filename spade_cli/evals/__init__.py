"""Held-out evaluation suites (spade-eval)."""
