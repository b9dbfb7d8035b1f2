"""spade: self-play in adaptive synthetic executable environments, as Unix commands."""

__version__ = "0.1.0"
SCHEMA_VERSION = 1
