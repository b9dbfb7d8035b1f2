"""GRPO training of the designer and the agent on a round's stored samples (spade-train).

- samples.py: scored candidate records -> groups of samples (designer / agent)
- feeder.py: how stored samples enter TRL's GRPOTrainer (rollout_func, env_mask, rewards)
- batches.py: a run's groups -> optimizer steps (the batch plan TRL is given)
- grpo.py:    model loading, the TRL run, metrics, the saved checkpoint
- launch.py:  `accelerate launch` of one worker per process (multi-GPU / multi-node / CPU gloo)
"""

from .config import TrainJob
from .samples import ROLES, BuildStats, Sample, mix_groups, read_groups

__all__ = ["ROLES", "BuildStats", "Sample", "TrainJob", "mix_groups", "read_groups"]
