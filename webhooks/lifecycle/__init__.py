"""The delivery row's life: its states, the pure policy after an attempt, and the transitions."""
