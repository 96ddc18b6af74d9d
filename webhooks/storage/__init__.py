"""Storage: engines and sessions, the models and migrations, and the statements kept per engine."""
