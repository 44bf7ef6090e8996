"""What tests, benchmarks and `roost demo` share: the scripted model (fakellm), a real pi
driven over RPC (testpi.py), the one test lab (lab.py) and waiting on conditions and processes
(procs.py)."""
