"""What tests, benchmarks and `roost demo` share: the scripted model (fakellm), a pi driven
over RPC (pi.py) and the one test lab (lab.py)."""
