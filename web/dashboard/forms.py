"""The dashboard's forms (Flask-WTF): each renders its CSRF token and validates input.

CSRF is also checked for every POST of the dashboard before its view runs
(see ``blueprint.py``), so a form without a token never reaches a view.
"""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import (
    DateTimeLocalField,
    HiddenField,
    PasswordField,
    RadioField,
    SelectChoice,
    SelectField,
    SelectMultipleField,
    StringField,
    TextAreaField,
    widgets,
)
from wtforms.validators import DataRequired, Length, Optional, ValidationError

from webhooks.config import get_settings
from webhooks.events.catalogue import CATALOGUE
from webhooks.services.subscriptions import custom_headers

from ..schemas import MAX_DESCRIPTION_LENGTH
from ..targets import MAX_URL_LENGTH, url_problem
from .options import IN_FORM, form_fields

__all__ = ["SignInForm", "SubscriptionForm", "RotateForm", "RecoverForm", "ALL_TYPES",
           "ONLY_TYPES", "TYPE_DESCRIPTIONS", "MASK", "headers_text", "headers_to_store",
           "parse_headers"]

TYPE_DESCRIPTIONS = {t.name: t.description for t in CATALOGUE}

#: What the edit form shows in place of each custom header's value (the URL's password mask).
MASK = "***"

ALL_TYPES = "all"
ONLY_TYPES = "only"


class SignInForm(FlaskForm):
    api_key = PasswordField(
        "API key",
        validators=[DataRequired("Enter your API key."), Length(max=200)],
        render_kw={"autocomplete": "off", "spellcheck": "false", "placeholder": "whk_…"},
    )
    next = HiddenField()


class _CheckboxList(SelectMultipleField):
    widget = widgets.ListWidget(prefix_label=False)
    option_widget = widgets.CheckboxInput()


def _storable(_form, field) -> None:
    """No NUL character, no unpaired surrogate: the database cannot store them (a 500 on
    PostgreSQL); the API's Text field refuses the same."""
    value = field.data
    if not isinstance(value, str):
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("Remove the characters that cannot be stored.") from None
    if "\x00" in value:
        raise ValidationError("Remove the NUL character (\\0): it cannot be stored.")


def _valid_url(_form, field) -> None:
    problem = url_problem(field.data or "")
    if problem:
        raise ValidationError(problem)


def parse_headers(text: str) -> dict[str, str]:
    """``Name: value`` lines as a dict (blank lines skipped); ValidationError for a line
    without a colon (named by its number, never quoted: values are not echoed)."""
    headers: dict[str, str] = {}
    for number, line in enumerate((text or "").splitlines(), start=1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        if not colon:
            raise ValidationError(f"Line {number} has no colon: write each header as Name: value.")
        headers[name.strip()] = value.strip()
    return headers


def headers_text(headers: dict | None) -> str:
    """Headers as the edit form shows them: one ``Name: value`` line each, every value
    :data:`MASK`ed (a value is a secret: secrets_shown.py)."""
    return "\n".join(f"{name}: {MASK}" for name in (headers or {}))


def headers_to_store(submitted: dict[str, str], stored: dict | None) -> dict[str, str]:
    """The headers to keep when ``submitted`` (read from the form) replaces ``stored``: a
    value sent back as :data:`MASK` means "unchanged" for a header that has a stored value,
    as the URL's masked password does (target_urls.url_to_store)."""
    stored = stored or {}
    return {name: stored[name] if value == MASK and name in stored else value
            for name, value in submitted.items()}


# A field for each per-subscription option the form offers (options.py).
_OptionFields = type("_OptionFields", (FlaskForm,), form_fields())


class SubscriptionForm(_OptionFields):
    # The declarations of the option fields, for the template and the views.
    declared_options = IN_FORM

    url = StringField(
        "Endpoint URL",
        validators=[DataRequired("Enter the URL of your endpoint."), _valid_url],
        filters=[lambda value: value.strip() if isinstance(value, str) else value],
        render_kw={"placeholder": "https://example.com/webhooks", "maxlength": MAX_URL_LENGTH,
                   "spellcheck": "false"},
    )
    filter_mode = RadioField(
        "Event types",
        choices=[
            SelectChoice(ALL_TYPES, "All event types, including types added later"),
            SelectChoice(ONLY_TYPES, "Only the types checked below"),
        ],
        default=ALL_TYPES,
    )
    # No Optional() here: it would stop validate_event_types when nothing is checked.
    event_types = _CheckboxList("Types", choices=[SelectChoice(t.name) for t in CATALOGUE])
    description = TextAreaField(
        "Description (optional)",
        validators=[Optional(), Length(max=MAX_DESCRIPTION_LENGTH), _storable],
        filters=[lambda value: value.strip() if isinstance(value, str) else value],
        render_kw={"rows": 2},
    )
    headers = TextAreaField(
        "Custom headers (optional)",
        render_kw={"rows": 3, "spellcheck": "false", "placeholder": "Authorization: Bearer …"},
    )

    def validate_headers(self, field) -> None:
        headers = parse_headers(field.data)
        problems = custom_headers.problems(headers)
        refused = custom_headers.reserved(headers, get_settings().service_name)
        if refused:
            problems.append(f"{', '.join(refused)} cannot be set: the service sets "
                            f"{'it' if len(refused) == 1 else 'them'}")
        if problems:
            sentence = "; ".join(problems)
            raise ValidationError(sentence[0].upper() + sentence[1:] + ".")

    def chosen_settings(self, stored_headers: dict | None = None) -> dict:
        """The subscription's settings as store.create_subscription / change_subscription
        take them; ``stored_headers``: the values a masked header keeps (edit)."""
        return {
            "event_types": self.chosen_event_types(),
            "description": self.description.data or None,
            "headers": headers_to_store(parse_headers(self.headers.data), stored_headers),
            **{option.name: self[option.name].data for option in self.declared_options},
        }

    def show(self, subscription) -> None:
        """Fill the fields with ``subscription``'s settings, as its edit form starts."""
        self.description.data = subscription.description or ""
        self.headers.data = headers_text(subscription.headers)
        for option in self.declared_options:
            self[option.name].data = getattr(subscription, option.name)
        if subscription.event_types is None:
            self.filter_mode.data = ALL_TYPES
        else:
            self.filter_mode.data = ONLY_TYPES
            self.event_types.data = list(subscription.event_types)

    def validate_event_types(self, field) -> None:
        if self.filter_mode.data == ONLY_TYPES and not field.data:
            raise ValidationError("Check at least one type, or choose all event types.")

    def chosen_event_types(self) -> list[str] | None:
        """None for every type; otherwise the checked names in catalogue order."""
        if self.filter_mode.data != ONLY_TYPES:
            return None
        checked = set(self.event_types.data or ())
        return [t.name for t in CATALOGUE if t.name in checked]



class RotateForm(FlaskForm):
    """Rotate the signing secret at once, or stage the new one to take over later."""

    activate_in = SelectField(
        "The new secret signs",
        choices=[SelectChoice("", "at once"), SelectChoice("3600", "in 1 hour"),
                 SelectChoice("86400", "in 24 hours"), SelectChoice("604800", "in 7 days")],
        default="",
    )

    def chosen_activate_in(self) -> int | None:
        """Seconds until the new secret signs, or None for at once."""
        return int(self.activate_in.data) if self.activate_in.data else None


# The recover window's times: shown as the first, 24-hour UTC as every time of the
# dashboard; the second (an ISO 8601 "T") is taken too.
RECOVER_TIME_FORMATS = ("%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M")
_RECOVER_TIME_INPUT = {"type": "text", "placeholder": "YYYY-MM-DD HH:MM", "autocomplete": "off",
                       "spellcheck": "false", "size": 16}


class FilterTestForm(FlaskForm):
    """A sample event to try the subscription's filter on (nothing is sent)."""

    event = TextAreaField("Sample event (its envelope, as JSON)",
                          validators=[DataRequired("Paste an event envelope."),
                                      Length(max=256 * 1024)])


class RecoverForm(FlaskForm):
    """The window of deliveries to recover, in UTC (as every time the dashboard shows)."""

    # Shown as text (render_kw), not <input type="datetime-local">: a browser shows that in the local
    # 12- or 24-hour format, beside pages that show every time as 24-hour UTC.
    since = DateTimeLocalField("From (UTC)", format=list(RECOVER_TIME_FORMATS),
                          render_kw=_RECOVER_TIME_INPUT,
                          validators=[DataRequired("Enter when the window starts.")])
    until = DateTimeLocalField("Until (UTC, optional)", format=list(RECOVER_TIME_FORMATS),
                          render_kw=_RECOVER_TIME_INPUT, validators=[Optional()])
