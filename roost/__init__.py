"""roost: a per-user supervisor for pi coding-agent sessions."""

__version__ = "0.1.0"
PROTOCOL_VERSION = 1
