"""`roost doctor`: the checks of roost, pi, its model and the disk."""
