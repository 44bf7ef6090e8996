"""Agent-to-agent messaging: envelope, peers, reach, the tree, hand-back rules."""
