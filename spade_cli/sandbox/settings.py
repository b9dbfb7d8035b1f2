"""The sandbox settings users set (command-line flags of spade-validate, spade-rollout
and spade-eval; the `[sandbox]` table of a loop config). The rest of the limits keep
`SandboxConfig`'s defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..declare import option


@dataclass
class SandboxSettings:
    TABLE: ClassVar[str] = "sandbox"

    unsafe_no_sandbox: bool = option(
        False,
        "--unsafe-no-sandbox",
        help="""Run designer code
        WITHOUT the bubblewrap sandbox (rlimits only). Dangerous: only for trusted code or
        inside a disposable VM/container.""",
    )
    unsafe_no_seccomp: bool = option(
        False,
        "--unsafe-no-seccomp",
        help="""Where no
        seccomp filter can be built (libseccomp missing, an unknown architecture), run
        workers without one instead of refusing to start; every record then says
        `seccomp: false`.""",
    )
    packages: list[str] = option(
        None,
        "--sandbox-package",
        factory=list,
        help="""Another
        installed distribution the environments may import inside the sandbox (repeatable;
        its dependencies come along), e.g. reasoning-gym for its fixed pool.""",
    )
    call_timeout: float = option(
        5.0, "--call-timeout", min=0.1, help="Wall seconds one reset()/step() call may take."
    )
    memory_mb: int = option(
        512, "--memory-mb", min=192, help="Address space of one sandboxed environment worker, MiB."
    )

    def config(self, **limits: Any):
        """The `SandboxConfig` of these options, with other limits as given."""
        from .config import SandboxConfig

        return SandboxConfig(
            unsafe=self.unsafe_no_sandbox,
            allow_no_filter=self.unsafe_no_seccomp,
            call_timeout=self.call_timeout,
            memory_mb=self.memory_mb,
            packages=tuple(self.packages),
            **limits,
        )
