"""Schema migrations with Alembic, run by ``webhooks db upgrade`` (idempotent)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from .config import get_settings
from .db import get_engine

__all__ = ["upgrade", "alembic_config"]

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str | None = None) -> Config:
    """An Alembic configuration for ``url`` (default: WEBHOOKS_DATABASE_URL)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", (url or get_settings().database_url).replace("%", "%%"))
    return config


def upgrade(url: str | None = None, revision: str = "head") -> None:
    """Create or upgrade the schema to ``revision``."""
    config = alembic_config(url)
    with get_engine(url).begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
