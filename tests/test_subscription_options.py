"""The per-subscription options are declared once (webhooks/tenants/options.py): the API's
fields, the OpenAPI document, the settings create and change take, the dashboard's form and
page, and the claim's loads all come from the declarations. No server needed."""

from __future__ import annotations

from pathlib import Path

import pytest
from marshmallow import ValidationError, missing
from werkzeug.datastructures import MultiDict

from webhooks.lifecycle import changes, claim
from webhooks.storage.models import Subscription
from webhooks.tenants.options import (BY_NAME, CLAIMED, OPTIONS, SETTABLE, Fact, FormField, Kind,
                                       Option)

PAUSE_AFTER = Option(  # an option as a new one would be declared (the column is not needed)
    "pause_after", Kind.INTEGER, minimum=1, maximum=100, fallback="pause_after",
    description="consecutive failures that pause it; null: WEBHOOKS_PAUSE_AFTER",
    shown_description="null: WEBHOOKS_PAUSE_AFTER",
    form=FormField("Pause after (optional)", help="Pauses after this many failures in a row.",
                   placeholder="service default"),
    fact=Fact("Pause after", "{value} consecutive failures",
              when_null="service default ({fallback})"),
)


def test_every_stored_option_is_a_column_of_subscriptions():
    columns = set(Subscription.__table__.c.keys())
    stored = [option.name for option in OPTIONS if option.value is None and option.reading is None]
    assert [name for name in stored if name not in columns] == []


def test_every_reading_an_option_names_is_one_the_services_hand_down():
    # tenants/options.py is below the lifecycle: what the adaptive pace shows is named there
    # and computed by lifecycle/adaptive_pace.READINGS, which services/subscriptions.py passes.
    from webhooks.lifecycle.adaptive_pace import READINGS

    named = {option.reading for option in OPTIONS if option.reading is not None}
    assert named == {"in_flight_now", "rate_now"}
    assert named <= set(READINGS)


def test_create_and_change_take_the_editable_options_stored_as_given():
    assert {"max_in_flight", "rate_limit"} <= set(SETTABLE)
    assert "in_flight_limit" not in SETTABLE  # read-only
    assert "signature_scheme" not in SETTABLE  # applied with a new secret (services)
    assert set(changes.SETTINGS) == {"event_types", "description", "headers", *SETTABLE,
                                     "client_certificate", "oauth2", "filter", "retry_schedule"}


def test_the_claim_loads_every_claimed_option_by_name():
    assert set(CLAIMED) <= set(claim._COLUMNS)


def test_the_api_schemas_have_a_field_for_each_option():
    from web.schemas import SubscriptionCreateSchema, SubscriptionSchema, SubscriptionUpdateSchema

    editable = {option.name for option in OPTIONS if option.editable}
    for schema in (SubscriptionCreateSchema(), SubscriptionUpdateSchema()):
        assert editable <= set(schema.fields) and "in_flight_limit" not in schema.fields
    assert {option.name for option in OPTIONS} <= set(SubscriptionSchema().fields)
    loaded = SubscriptionCreateSchema().load({"url": "https://example.com/in"})
    assert loaded["signature_scheme"] == "service" and loaded["max_in_flight"] is None


@pytest.mark.parametrize("create", [True, False])
def test_a_declared_integer_is_loaded_strictly_within_its_bounds(create):
    from web.schemas.options import _request_field

    field = _request_field(PAUSE_AFTER, create=create)
    assert field.deserialize(5) == 5 and field.deserialize(None) is None
    for refused, message in ((0, "greater than or equal to 1"), (101, "less than or equal to 100"),
                             (True, "Not a valid integer"), (1.0, "Not a valid integer"),
                             ("5", "Not a valid integer")):
        with pytest.raises(ValidationError, match=message):
            field.deserialize(refused)
    assert field.metadata["description"] == PAUSE_AFTER.description
    assert field.load_default is (None if create else missing)  # left out of a PATCH: unchanged


def test_a_declared_choice_is_one_of_its_choices_and_never_null():
    from web.schemas.options import _request_field

    scheme = next(option for option in OPTIONS if option.kind is Kind.CHOICE)
    field = _request_field(scheme, create=True)
    assert field.deserialize("standard") == "standard"
    for refused in ("x", None):
        with pytest.raises(ValidationError):
            field.deserialize(refused)


def test_the_routes_name_every_editable_option():
    from web.api import subscriptions as routes

    for option in OPTIONS:
        if option.editable:
            assert f"`{option.name}`" in routes._PATCHABLE
            assert f"`{option.name}" in routes._OPTIONAL_ON_CREATE


@pytest.fixture
def request_context(sqlite_db, tmp_path, monkeypatch):
    from webhooks.config import reset_settings_cache

    monkeypatch.setenv("WEBHOOKS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("WEBHOOKS_RATE_LIMIT_STORAGE_URL", "memory://")
    reset_settings_cache()
    from web import create_app

    with create_app({"TESTING": True, "WTF_CSRF_ENABLED": False}).test_request_context():
        yield


def test_a_declared_form_field_checks_its_bounds_and_empty_means_null(request_context):
    from flask_wtf import FlaskForm

    from web.dashboard.options import _form_field

    Form = type("Form", (FlaskForm,), {"pause_after": _form_field(PAUSE_AFTER)})
    assert Form(formdata=MultiDict({"pause_after": "7"})).validate()
    empty = Form(formdata=MultiDict({"pause_after": ""}))
    assert empty.validate() and empty.pause_after.data is None
    over = Form(formdata=MultiDict({"pause_after": "101"}))
    assert not over.validate() and over.pause_after.errors == ["Number must be between 1 and 100."]
    html = str(over.pause_after())
    assert 'min="1"' in html and 'max="100"' in html and 'placeholder="service default"' in html


def test_the_form_renders_every_option_it_offers_with_its_help(request_context):
    from flask import render_template

    from web.dashboard.forms import TYPE_DESCRIPTIONS, SubscriptionForm

    form = SubscriptionForm()
    html = render_template("dashboard/subscription_form.html", form=form, subscription=None,
                           descriptions=TYPE_DESCRIPTIONS)
    assert form.declared_options  # max_in_flight and rate_limit today
    for option in form.declared_options:
        assert f'<label for="{option.name}">{option.form.label}</label>' in html
        assert f'id="{option.name}"' in html and option.form.help.replace("'", "&#39;") in html


def test_the_page_says_each_option_s_value_or_what_applies_without_it(request_context,
                                                                      monkeypatch):
    from web.dashboard import options as page

    # These options alone, so that the next declared option leaves this test as it is.
    shown = (BY_NAME["max_in_flight"], BY_NAME["rate_limit"], BY_NAME["current_rate_limit"],
             PAUSE_AFTER)
    monkeypatch.setattr(page, "OPTIONS", shown)
    monkeypatch.setattr(page, "option_values", lambda _: {
        "max_in_flight": None, "rate_limit": 2.5, "current_rate_limit": 1.9, "pause_after": 3})
    lines = {fact.element_id: (fact.text, fact.muted) for fact in page.facts(Subscription())}
    assert lines == {"max-in-flight": ("service default (10)", True),
                     "rate-limit": ("at most 2.5 attempts per second; the rest wait their turn",
                                    False),
                     "current-rate-limit": ("1.9 attempts per second", False),
                     "pause-after": ("3 consecutive failures", False)}


def test_the_reference_says_what_a_declared_option_takes_from_its_declaration():
    from webhooks.tenants.option_reference import reference, takes

    assert takes(PAUSE_AFTER) == ("A whole number 1 to 100, or null; default null. Set by "
                                  "create and PATCH, and the dashboard's form "
                                  '("Pause after (optional)").')
    scheme = next(option for option in OPTIONS if option.kind is Kind.CHOICE)
    assert takes(scheme).startswith(
        "One of `service`, `standard`, `standard-ed25519` (never null); default `service`")
    text = reference((*OPTIONS, PAUSE_AFTER))
    assert [line for line in text.splitlines() if line.startswith("`")] == [
        f"`{option.name}`" for option in (*OPTIONS, PAUSE_AFTER)]
    assert f"In requests: {PAUSE_AFTER.description}." in " ".join(text.split())
    in_flight = reference((next(option for option in OPTIONS if not option.editable),))
    assert "Read-only: shown in every answer, never set." in in_flight
    assert "In requests" not in in_flight


def test_each_option_s_details_are_in_the_reference_docs_api_md_points_to():
    from webhooks.tenants.option_reference import reference

    flowing = " ".join(reference().split())
    assert all(" ".join(option.details.split()) in flowing for option in OPTIONS)
    assert any(option.details for option in OPTIONS)
    api = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text(encoding="utf-8")
    assert "`webhooks options`" in api and "Subscription options" in api
