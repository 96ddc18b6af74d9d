"""Who an API key belongs to (the key's SHA-256 is what is stored)."""

from webhooks.tenants.accounts import account_for_key

__all__ = ["account_for_key"]
