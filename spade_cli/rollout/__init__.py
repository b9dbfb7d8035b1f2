"""spade-rollout as a library: multi-turn episodes with and without the privileged hint.

    from spade_cli.rollout import run_rollouts, ModelAgent, ReplayAgent
    agent = ModelAgent(load_engine(path), Sampling(max_tokens=256))
    for rec in run_rollouts(candidates, agent, k=4, seed=0, sandbox_cfg=SandboxConfig()):
        ...

- runner.py: the stage (scheduling, batching, seeds, records, summary statistics)
  (`job_factory` feeds it other items: spade-eval's tasks, `evals/agent.py`)
- episode.py: one episode's state machine, action extraction, stop reasons
- trajectory.py: exact token trajectories (prompt ids, completion ids, env mask, logprobs)
- agents.py: the prompt template, the model agent, the replay agent
"""

from .agents import AgentPrompt, ModelAgent, ReplayAgent
from .episode import DEFAULT_MAX_TURNS, action_text
from .runner import RolloutStats, run_rollouts, summarise

__all__ = [
    "DEFAULT_MAX_TURNS",
    "ModelAgent",
    "AgentPrompt",
    "ReplayAgent",
    "RolloutStats",
    "action_text",
    "run_rollouts",
    "summarise",
]
