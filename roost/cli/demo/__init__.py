"""`roost demo`: the story told on the real pi with the scripted model (`story`), the model's
rules (`model`), and play mode, a sandbox kept to try roost in (`play`)."""
