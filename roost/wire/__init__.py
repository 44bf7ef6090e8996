"""The wire: roostd's socket protocol, its connection and codec, the client."""
