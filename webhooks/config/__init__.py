"""Configuration: settings read once from the environment, their parsers, the data folder, log lines.

``from webhooks.config import get_settings`` is how every process reads the settings.
"""

from webhooks.config.settings import Settings, get_settings, load_settings, reset_settings_cache

__all__ = ["Settings", "get_settings", "load_settings", "reset_settings_cache"]
