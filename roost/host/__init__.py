"""The machine: paths under ROOST_HOME, files written atomically and trusted, process identity,
content watches."""
