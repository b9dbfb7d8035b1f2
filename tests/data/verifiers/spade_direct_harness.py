"""A verifiers harness for offline tests: the `null` harness (verifiers' own chat program)
run with this Python, instead of in a uv environment that uv would download first."""

import sys

from verifiers.v1.harnesses.null.harness import NullHarness

SCRIPT = "vf-chat-program.py"


class _ThisPython:
    """The runtime, except that a PEP 723 script runs with sys.executable (which has the
    chat program's dependencies: verifiers needs them too)."""

    def __init__(self, runtime):
        self._runtime = runtime

    def __getattr__(self, name):
        return getattr(self._runtime, name)

    async def prepare_uv_script(self, script, env=None, *, activate=True):
        await self._runtime.write(SCRIPT, script.encode() if isinstance(script, str) else script)
        return [sys.executable, SCRIPT]


class DirectHarness(NullHarness):
    async def setup(self, runtime):
        pass  # nothing to install

    async def launch(self, ctx, trace, runtime, *args, **kwargs):
        return await super().launch(ctx, trace, _ThisPython(runtime), *args, **kwargs)


__all__ = ["DirectHarness"]
