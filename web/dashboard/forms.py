"""The dashboard's forms (Flask-WTF): each renders its CSRF token and validates input.

CSRF is also checked for every POST of the dashboard before its view runs
(see ``blueprint.py``), so a form without a token never reaches a view.
"""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import (
    HiddenField,
    PasswordField,
    RadioField,
    SelectChoice,
    SelectMultipleField,
    StringField,
    TextAreaField,
    widgets,
)
from wtforms.validators import DataRequired, Length, Optional, ValidationError

from webhooks.catalogue import CATALOGUE

from ..schemas import MAX_DESCRIPTION_LENGTH
from ..targets import MAX_URL_LENGTH, url_problem

__all__ = ["SignInForm", "SubscriptionForm", "ALL_TYPES", "ONLY_TYPES"]

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


def _valid_url(_form, field) -> None:
    problem = url_problem(field.data or "")
    if problem:
        raise ValidationError(problem)


class SubscriptionForm(FlaskForm):
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
        validators=[Optional(), Length(max=MAX_DESCRIPTION_LENGTH)],
        filters=[lambda value: value.strip() if isinstance(value, str) else value],
        render_kw={"rows": 2},
    )

    def validate_event_types(self, field) -> None:
        if self.filter_mode.data == ONLY_TYPES and not field.data:
            raise ValidationError("Check at least one type, or choose all event types.")

    def chosen_event_types(self) -> list[str] | None:
        """None for every type; otherwise the checked names in catalogue order."""
        if self.filter_mode.data != ONLY_TYPES:
            return None
        checked = set(self.event_types.data or ())
        return [t.name for t in CATALOGUE if t.name in checked]

    def chosen_description(self) -> str | None:
        return self.description.data or None
