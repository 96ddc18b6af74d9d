"""Settings from the environment exactly as CONTRACT 1 says; bad values name the variable."""

import re

import pytest

from webhooks.config import load_settings
from webhooks.errors import ConfigError


def test_defaults_are_the_contract_defaults(tmp_path):
    settings = load_settings({"WEBHOOKS_DATA_DIR": str(tmp_path)})
    assert settings.retry_delays == (60, 300, 1800, 7200, 43200)
    assert settings.max_attempts == 6
    assert settings.pause_after == 25
    assert settings.service_name == "Service"
    assert settings.header("Signature") == "X-Service-Signature"
    assert settings.version == "2026-07-30"
    assert settings.timeout == 15
    assert settings.allow_private_targets is False
    assert settings.countdown_limit == 300
    assert settings.sweep_interval == 5
    assert settings.database_url == f"sqlite:///{tmp_path / 'webhooks.db'}"
    assert settings.is_embedded_database and settings.is_embedded_broker


def test_every_variable_is_read():
    settings = load_settings(
        {
            "WEBHOOKS_DATABASE_URL": "postgresql+psycopg2://u@h/d",
            "WEBHOOKS_BROKER_URL": "redis://h:6379/0",
            "WEBHOOKS_RETRY_DELAYS": "1, 2,3",
            "WEBHOOKS_PAUSE_AFTER": "3",
            "WEBHOOKS_SERVICE_NAME": "Acme",
            "WEBHOOKS_VERSION": "2027-01-01",
            "WEBHOOKS_TIMEOUT": "2.5",
            "WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",
            "WEBHOOKS_COUNTDOWN_LIMIT": "10",
            "WEBHOOKS_SWEEP_INTERVAL": "0.5",
        }
    )
    assert settings.database_url == "postgresql+psycopg2://u@h/d"
    assert settings.broker_url == "redis://h:6379/0"
    assert settings.retry_delays == (1, 2, 3) and settings.max_attempts == 4
    assert settings.pause_after == 3
    assert settings.header("Event-Id") == "X-Acme-Event-Id"
    assert settings.version == "2027-01-01"
    assert settings.timeout == 2.5
    assert settings.allow_private_targets is True
    assert settings.countdown_limit == 10
    assert settings.sweep_interval == 0.5
    assert not settings.is_embedded_database and not settings.is_embedded_broker


@pytest.mark.parametrize(
    "name, value",
    [
        ("WEBHOOKS_RETRY_DELAYS", "60,abc"),
        ("WEBHOOKS_RETRY_DELAYS", "60,-1"),
        ("WEBHOOKS_PAUSE_AFTER", "0"),
        ("WEBHOOKS_PAUSE_AFTER", "2.5"),
        ("WEBHOOKS_TIMEOUT", "fast"),
        ("WEBHOOKS_TIMEOUT", "-1"),
        ("WEBHOOKS_TIMEOUT", "nan"),
        ("WEBHOOKS_ALLOW_PRIVATE_TARGETS", "maybe"),
        ("WEBHOOKS_VERSION", "July 2026"),
        ("WEBHOOKS_VERSION", "\u0662\u0660\u0662\u0666-\u0660\u0667-\u0663\u0660"),  # Arabic-Indic digits
        ("WEBHOOKS_VERSION", "\uff12\uff10\uff12\uff16-\uff10\uff17-\uff13\uff10"),  # full-width digits
        ("WEBHOOKS_VERSION", "2026-02-30"),
        ("WEBHOOKS_VERSION", "2026-13-01"),
        ("WEBHOOKS_VERSION", "2026-00-10"),
        ("WEBHOOKS_SERVICE_NAME", "Bad Name"),
        ("WEBHOOKS_SWEEP_INTERVAL", "0"),
        ("WEBHOOKS_COUNTDOWN_LIMIT", "-5"),
        ("WEBHOOKS_MAX_IN_FLIGHT", "-1"),
        ("WEBHOOKS_MAX_IN_FLIGHT", "2.5"),
        ("WEBHOOKS_MAX_IN_FLIGHT", "many"),
        ("WEBHOOKS_RETRY_AFTER_MAX", "-1"),
        ("WEBHOOKS_RETRY_AFTER_MAX", "1h"),
    ],
)
def test_malformed_values_name_the_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        load_settings({name: value})


@pytest.mark.parametrize("version", ["2028-02-29", "1999-12-31", "2026-07-30"])
def test_a_real_date_is_a_version(version):
    assert load_settings({"WEBHOOKS_VERSION": version}).version == version


def test_retry_after_is_capped_at_12_hours_and_0_keeps_the_plain_ladder():
    assert load_settings({}).retry_after_max == 43200
    assert load_settings({"WEBHOOKS_RETRY_AFTER_MAX": "0"}).retry_after_max == 0
    assert load_settings({"WEBHOOKS_RETRY_AFTER_MAX": "600"}).retry_after_max == 600


def test_countdown_limit_zero_parks_every_wait():
    assert load_settings({"WEBHOOKS_COUNTDOWN_LIMIT": "0"}).countdown_limit == 0


def test_the_in_flight_cap_defaults_to_10_and_0_turns_it_off(tmp_path):
    assert load_settings({"WEBHOOKS_DATA_DIR": str(tmp_path)}).max_in_flight == 10
    assert load_settings({"WEBHOOKS_MAX_IN_FLIGHT": "3"}).max_in_flight == 3
    assert load_settings({"WEBHOOKS_MAX_IN_FLIGHT": "0"}).max_in_flight == 0


def test_ca_bundle_defaults_to_certifi_and_names_a_pem_file(tmp_path):
    assert load_settings({}).ca_bundle is None  # the sender then trusts certifi's bundle
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    assert load_settings({"WEBHOOKS_CA_BUNDLE": str(pem)}).ca_bundle == str(pem)


@pytest.mark.parametrize("content", [None, "not a certificate"])
def test_a_ca_bundle_that_is_missing_or_not_pem_names_the_variable(tmp_path, content):
    path = tmp_path / "ca.pem"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match="WEBHOOKS_CA_BUNDLE"):
        load_settings({"WEBHOOKS_CA_BUNDLE": str(path)})


def test_in_flight_caps_for_test_pings_and_accounts():
    defaults = load_settings({})
    assert (defaults.test_max_in_flight, defaults.account_max_in_flight) == (2, 20)
    chosen = load_settings({"WEBHOOKS_TEST_MAX_IN_FLIGHT": "0", "WEBHOOKS_ACCOUNT_MAX_IN_FLIGHT": "5"})
    assert (chosen.test_max_in_flight, chosen.account_max_in_flight) == (0, 5)
    with pytest.raises(ConfigError, match="WEBHOOKS_ACCOUNT_MAX_IN_FLIGHT"):
        load_settings({"WEBHOOKS_ACCOUNT_MAX_IN_FLIGHT": "-1"})


def test_retention_defaults_to_30_days_in_batches_of_500_and_0_keeps_everything():
    settings = load_settings({})
    assert (settings.retention_days, settings.purge_batch) == (30, 500)
    assert (settings.purge_interval, settings.purge_seconds) == (60, 10)
    assert load_settings({"WEBHOOKS_RETENTION_DAYS": "0"}).retention_days == 0
    assert load_settings({"WEBHOOKS_RETENTION_DAYS": "400", "WEBHOOKS_PURGE_BATCH": "10000",
                          "WEBHOOKS_PURGE_SECONDS": "60"}).retention_days == 400


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("WEBHOOKS_RETENTION_DAYS", "-1", "0 or more"),
        ("WEBHOOKS_RETENTION_DAYS", "a month", "whole number"),
        ("WEBHOOKS_RETENTION_DAYS", "1.5", "whole number"),
        ("WEBHOOKS_PURGE_BATCH", "0", "greater than 0"),
        ("WEBHOOKS_PURGE_BATCH", "10001", "at most 10000"),
        ("WEBHOOKS_PURGE_INTERVAL", "0", "greater than 0"),
        ("WEBHOOKS_PURGE_SECONDS", "61", "at most 60"),
    ],
)
def test_malformed_retention_settings_name_the_variable(name, value, message):
    with pytest.raises(ConfigError) as error:
        load_settings({name: value})
    assert name in str(error.value) and message in str(error.value)


@pytest.mark.parametrize("name, value, message", [
    ("WEBHOOKS_RETENTION_DAYS", "abc", "WEBHOOKS_RETENTION_DAYS must be a whole number of days"),
    ("WEBHOOKS_TIMEOUT", "fast", "WEBHOOKS_TIMEOUT must be a number of seconds"),
    ("WEBHOOKS_MAX_PAYLOAD_BYTES", "1MB", "WEBHOOKS_MAX_PAYLOAD_BYTES must be a whole number of "
                                          "bytes"),
    ("WEBHOOKS_MAX_IN_FLIGHT", "many", "WEBHOOKS_MAX_IN_FLIGHT must be a whole number of attempts"),
])
def test_a_value_that_is_no_number_is_refused_in_the_variable_s_own_unit(name, value, message):
    with pytest.raises(ConfigError) as error:
        load_settings({name: value})
    assert str(error.value).startswith(message) and "seconds or items" not in str(error.value)


def test_every_number_variable_has_its_unit():
    """A variable added to webhooks/config/settings.py without its UNITS entry would fall back to no unit."""
    import inspect

    from webhooks import config

    from webhooks.config import values as config_values

    source = inspect.getsource(config) + inspect.getsource(config_values)
    numbers = set(re.findall(r'positive_number\(\s*env, "(WEBHOOKS_[A-Z_]+)"', source))
    assert numbers and numbers <= set(config_values.UNITS), numbers - set(config_values.UNITS)


# ---------------------------------------------------------------- database URLs (issue 36, item 12)

SUPPORTED_FORMS = ("postgresql://", "postgres://", "postgresql+psycopg2://", "sqlite:///")


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "POSTGRESQL", "postgresql+psycopg2"])
def test_every_plain_postgresql_url_goes_through_the_installed_driver(scheme):
    """A bare postgresql:// made SQLAlchemy 2.1 load psycopg 3, which is not installed
    (ModuleNotFoundError); postgres:// named no dialect at all."""
    primary, replica = f"{scheme}://app:pw@db/webhooks", f"{scheme}://app:pw@replica/webhooks"
    settings = load_settings({"WEBHOOKS_DATABASE_URL": primary,
                              "WEBHOOKS_READ_DATABASE_URL": replica})
    assert settings.database_url == "postgresql+psycopg2://app:pw@db/webhooks"
    assert settings.read_database_url == "postgresql+psycopg2://app:pw@replica/webhooks"


def test_the_mapped_url_builds_an_engine_with_psycopg2():
    from sqlalchemy import create_engine

    url = load_settings({"WEBHOOKS_DATABASE_URL": "postgresql://app@db/webhooks"}).database_url
    engine = create_engine(url)
    assert engine.dialect.driver == "psycopg2"
    engine.dispose()


@pytest.mark.parametrize("value, got", [
    ("mysql://app:s3cret@db/webhooks", "got a mysql:// URL"),
    ("postgresql+psycopg://app:s3cret@db/webhooks", "got a postgresql+psycopg:// URL"),
    ("app:s3cret@db/webhooks", "got a value that is not a URL"),
    ("junk", "got a value that is not a URL"),
    ("postgresql://app:s3cret@db:port/webhooks", "got a malformed postgresql:// URL"),
])
def test_an_unsupported_database_url_is_one_line_naming_what_is_supported(value, got):
    with pytest.raises(ConfigError) as error:
        load_settings({"WEBHOOKS_DATABASE_URL": value})
    message = str(error.value)
    assert message.startswith("WEBHOOKS_DATABASE_URL must be") and got in message, message
    assert all(form.rstrip("/") in message for form in SUPPORTED_FORMS), message
    assert "\n" not in message and "s3cret" not in message


def test_an_in_memory_sqlite_database_is_refused():
    """Every process and connection would get a new, empty database."""
    with pytest.raises(ConfigError, match="must name a SQLite file"):
        load_settings({"WEBHOOKS_DATABASE_URL": "sqlite://"})
