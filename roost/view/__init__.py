"""`roost view`: the textual agent view, its table, panes and keys."""
