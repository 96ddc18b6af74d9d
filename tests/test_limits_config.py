"""The per-tenant limits' settings: rates, their storage, the subscription limit."""

import pytest

from webhooks.config import load_settings
from webhooks.errors import ConfigError


def test_defaults(tmp_path):
    settings = load_settings({"WEBHOOKS_DATA_DIR": str(tmp_path)})
    assert settings.api_rate_limit == "100 per second"
    assert settings.test_rate_limit == "5 per 5 seconds"
    assert settings.max_subscriptions == 100
    # The embedded broker of `webhooks dev`: limits counted in each process's memory.
    assert settings.rate_limit_storage_url == "memory://"


@pytest.mark.parametrize("value", ["0", "off", "OFF", "none"])
def test_a_rate_limit_can_be_turned_off(value):
    settings = load_settings({"WEBHOOKS_API_RATE_LIMIT": value, "WEBHOOKS_TEST_RATE_LIMIT": value})
    assert settings.api_rate_limit is None and settings.test_rate_limit is None


def test_rates_in_the_flask_limiter_notation_are_kept_as_given():
    settings = load_settings({
        "WEBHOOKS_API_RATE_LIMIT": "50/second; 1000 per minute",
        "WEBHOOKS_TEST_RATE_LIMIT": "1 per second",
    })
    assert settings.api_rate_limit == "50/second; 1000 per minute"
    assert settings.test_rate_limit == "1 per second"


@pytest.mark.parametrize(
    "name, value",
    [
        ("WEBHOOKS_API_RATE_LIMIT", "fast"),
        ("WEBHOOKS_API_RATE_LIMIT", "100"),
        ("WEBHOOKS_API_RATE_LIMIT", "0 per second"),
        ("WEBHOOKS_API_RATE_LIMIT", "10 per fortnight"),
        ("WEBHOOKS_TEST_RATE_LIMIT", "5 per 5 seconds;"),
        ("WEBHOOKS_MAX_SUBSCRIPTIONS", "-1"),
        ("WEBHOOKS_MAX_SUBSCRIPTIONS", "many"),
        ("WEBHOOKS_RATE_LIMIT_STORAGE_URL", "localhost:6379"),
        ("WEBHOOKS_RATE_LIMIT_STORAGE_URL", "amqp://broker//"),
    ],
)
def test_malformed_values_name_the_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        load_settings({name: value})


def test_the_storage_is_the_brokers_redis_unless_one_is_named():
    redis_broker = {"WEBHOOKS_BROKER_URL": "redis://redis-host:6379/0"}
    assert load_settings(redis_broker).rate_limit_storage_url == "redis://redis-host:6379/0"
    tls_broker = {"WEBHOOKS_BROKER_URL": "rediss://redis-host:6380/0"}
    assert load_settings(tls_broker).rate_limit_storage_url == "rediss://redis-host:6380/0"
    named = {**redis_broker, "WEBHOOKS_RATE_LIMIT_STORAGE_URL": "redis://limits-host:6379/2"}
    assert load_settings(named).rate_limit_storage_url == "redis://limits-host:6379/2"
    assert load_settings({"WEBHOOKS_BROKER_URL": "amqp://mq//"}).rate_limit_storage_url == (
        "memory://"
    )
