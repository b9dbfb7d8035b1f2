"""spade-loop: rounds of design → validate → rollout → regret → train, resumable."""

from .config import LoopConfig, load_config
from .runner import Loop

__all__ = ["Loop", "LoopConfig", "load_config"]
