"""One module per command. COMMANDS maps each console script to its module; it must
match `[project.scripts]` in pyproject.toml (a test checks)."""

COMMANDS = {
    "spade-sample-docs": "spade_cli.commands.sample_docs",
    "spade-design": "spade_cli.commands.design",
    "spade-validate": "spade_cli.commands.validate",
    "spade-hint": "spade_cli.commands.hint",
    "spade-rollout": "spade_cli.commands.rollout",
    "spade-regret": "spade_cli.commands.regret",
    "spade-train": "spade_cli.commands.train",
    "spade-loop": "spade_cli.commands.loop",
    "spade-init-model": "spade_cli.commands.init_model",
    "spade-memory": "spade_cli.commands.memory",
    "spade-eval": "spade_cli.commands.eval",
    "spade-cat": "spade_cli.commands.cat",
    "spade-export": "spade_cli.commands.export",
}
