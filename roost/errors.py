"""The package's error base: every roost error derives from RoostError."""


class RoostError(Exception):
    """Base class of every error roost raises on purpose."""
