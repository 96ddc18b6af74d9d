"""The command line (``webhooks``, console script ``webhooks.cli:main``) and the dev server."""

from webhooks.cli.commands import main

__all__ = ["main"]
