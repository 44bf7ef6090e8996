"""`python -m roost.cli`: the `roost` command, as its console script runs it (entry.py)."""

from roost.cli.entry import main

main()
