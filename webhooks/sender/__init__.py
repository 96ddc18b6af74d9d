"""The HTTP sender: one POST per attempt, with its address guard and its whole-attempt deadline."""
