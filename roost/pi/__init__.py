"""Everything roost knows about the pi program: where it is, which node runs it, what it can.

- `roost.pi.locate`: finds pi and the node that runs it (`find_pi`), cheaply enough for a
  worker's start-up path (no subprocess, a few file reads).
- `roost.pi.compat`: `PiFeatures`, the one place that turns a pi version into behaviour.
"""
