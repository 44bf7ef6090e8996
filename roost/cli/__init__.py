"""The roost command line."""
