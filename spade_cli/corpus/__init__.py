"""Corpus reading and document sampling for spade-sample-docs.

    from spade_cli.corpus import Options, Plan, expand_inputs, sample, merge
    plan = Plan(expand_inputs(["data/*.jsonl.zst"]), quotas={None: 1000})
    docs, stats = sample(plan, Options(n=1000, seed=0), jobs=2)

`keys` (per-document sampling priorities), `sources` (inputs, formats, --mix),
`sampler` (the reservoir scan and the shard merge), `excerpt` (the window rule) and
`demo` (the demo corpus built from the standard library's documentation).
"""

from .excerpt import excerpt_window
from .sampler import Options, Plan, Reservoir, Stats, default_jobs, merge, sample
from .sources import Source, expand_inputs, parse_mix, quotas


def __getattr__(name: str):
    # Imported lazily so that `python -m spade_cli.corpus.demo` runs the module fresh.
    if name in ("build_demo_corpus", "demo_documents"):
        from . import demo

        return getattr(demo, name)
    raise AttributeError(name)


__all__ = [
    "Options",
    "Plan",
    "Reservoir",
    "Source",
    "Stats",
    "build_demo_corpus",
    "default_jobs",
    "demo_documents",
    "excerpt_window",
    "expand_inputs",
    "merge",
    "parse_mix",
    "quotas",
    "sample",
]
