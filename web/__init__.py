"""The Flask web app: HTTP API and dashboard. ``create_app()`` is the factory."""

from .app import create_app

__all__ = ["create_app"]
