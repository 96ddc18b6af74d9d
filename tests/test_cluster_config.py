"""The settings a cluster needs: a Sentinel broker, a read replica, the clock refresh."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from webhooks.config import load_settings
from webhooks.errors import ConfigError
from tests.support.celeryconf import ROOT

PG = "postgresql+psycopg2://u:secret@primary/webhooks"
SENTINELS = "sentinel://10.0.0.1:26379;sentinel://10.0.0.2:26379;sentinel://10.0.0.3:26379"


def test_the_replica_is_the_primary_unless_set():
    settings = load_settings({"WEBHOOKS_DATABASE_URL": PG})
    assert settings.read_database_url == "" and settings.reads_database_url == PG
    replica = "postgresql+psycopg2://u:secret@replica/webhooks"
    settings = load_settings({"WEBHOOKS_DATABASE_URL": PG, "WEBHOOKS_READ_DATABASE_URL": replica})
    assert settings.reads_database_url == replica


@pytest.mark.parametrize("primary, replica, message", [
    (PG, "mysql://u:secret@replica/w", "postgresql:// URL"),
    (PG, "replica-host", "postgresql:// URL"),
    ("sqlite:///w.db", "postgresql://u:secret@replica/w", "PostgreSQL primary"),
])
def test_a_replica_that_cannot_be_one_is_refused_without_its_password(primary, replica, message):
    with pytest.raises(ConfigError) as error:
        load_settings({"WEBHOOKS_DATABASE_URL": primary, "WEBHOOKS_READ_DATABASE_URL": replica})
    assert "WEBHOOKS_READ_DATABASE_URL" in str(error.value) and message in str(error.value)
    assert "secret" not in str(error.value)


def test_the_sentinel_master_name_defaults_to_mymaster_and_is_checked():
    assert load_settings({"WEBHOOKS_BROKER_URL": SENTINELS}).broker_master_name == "mymaster"
    assert load_settings({"WEBHOOKS_BROKER_URL": SENTINELS}).is_sentinel_broker
    named = load_settings({"WEBHOOKS_BROKER_MASTER_NAME": "webhooks-1"})
    assert named.broker_master_name == "webhooks-1"
    with pytest.raises(ConfigError, match="WEBHOOKS_BROKER_MASTER_NAME"):
        load_settings({"WEBHOOKS_BROKER_MASTER_NAME": "two words"})


def test_the_clock_refresh_is_a_positive_number_of_seconds():
    assert load_settings({}).clock_refresh == 30.0
    assert load_settings({"WEBHOOKS_CLOCK_REFRESH": "5"}).clock_refresh == 5.0
    with pytest.raises(ConfigError, match="WEBHOOKS_CLOCK_REFRESH"):
        load_settings({"WEBHOOKS_CLOCK_REFRESH": "0"})


@pytest.mark.process
def test_celery_reaches_the_broker_through_the_sentinels(tmp_path):
    """Read in a fresh interpreter, as each worker and web process reads celeryconfig."""
    script = ("import celeryconfig as c; from celery import Celery; app = Celery();"
              "app.config_from_object(c); conn = app.connection_for_write();"
              "print(conn.transport_options['master_name'], conn.transport_cls, *conn.alt)")
    env = {**os.environ, "WEBHOOKS_BROKER_URL": SENTINELS, "WEBHOOKS_DATA_DIR": str(tmp_path),
           "WEBHOOKS_BROKER_MASTER_NAME": "webhooks-1"}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.split()[:2] == ["webhooks-1", "webhooks.broker.redis_transport:SentinelTransport"]
    for host in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        assert host in out


def test_the_replica_lag_limit_defaults_to_10_s():
    assert load_settings({}).read_max_lag == 10.0
    with pytest.raises(ConfigError, match="WEBHOOKS_READ_MAX_LAG"):
        load_settings({"WEBHOOKS_READ_MAX_LAG": "-1"})
