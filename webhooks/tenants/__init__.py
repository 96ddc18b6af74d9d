"""Accounts and what belongs to a subscription beside its deliveries: quotas, secrets, custom headers."""
