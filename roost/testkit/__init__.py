"""What tests, benchmarks and `roost demo` share: the scripted model (fakellm), a pi driven
over RPC (pi.py), the one test lab (lab.py) and waiting on conditions and processes
(procs.py)."""
