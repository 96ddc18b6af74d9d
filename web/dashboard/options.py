"""The dashboard's side of the per-subscription options, made from their declarations
(webhooks/tenants/options.py, through webhooks.services.subscriptions): the subscription
form's field of each option that has one, and each option's line on the subscription's page.
"""

from __future__ import annotations

from dataclasses import dataclass

from wtforms import Field, FloatField, IntegerField, SelectChoice, SelectField
from wtforms.validators import InputRequired, NumberRange, Optional

from webhooks.config import get_settings
from webhooks.services.subscriptions import OPTIONS, Kind, Option, option_values
from webhooks.storage.models import Subscription

__all__ = ["IN_FORM", "form_fields", "OptionFact", "facts"]

# The options the subscription form offers, in their declared order.
IN_FORM = tuple(option for option in OPTIONS if option.editable and option.form is not None)


def _form_field(option: Option) -> Field:
    """The form field of ``option``: its label, bounds (checked, and given to the browser)
    and placeholder; an empty nullable field means null."""
    needed = Optional() if option.nullable else InputRequired()
    shown = {"placeholder": option.form.placeholder} if option.form.placeholder else {}
    if option.kind is Kind.CHOICE:
        return SelectField(option.form.label, validators=[needed], default=option.default,
                           choices=[SelectChoice(choice) for choice in option.choices])
    bounds = {"min": option.minimum, "max": option.maximum}
    if option.kind is Kind.INTEGER:
        return IntegerField(option.form.label, validators=[needed, NumberRange(**bounds)],
                            render_kw={**bounds, **shown})
    return FloatField(option.form.label, validators=[needed, NumberRange(**bounds)],
                      render_kw={**bounds, "step": "any", **shown})


def form_fields() -> dict[str, Field]:
    """The (unbound) form fields of :data:`IN_FORM`, by option name."""
    return {option.name: _form_field(option) for option in IN_FORM}


@dataclass(frozen=True)
class OptionFact:
    """One option's line on the subscription's page: ``muted`` when it says what applies in
    the option's absence."""

    label: str
    element_id: str
    text: str
    muted: bool


def _fallback(option: Option) -> object:
    """The service's own value of ``option`` (0 or none: no limit)."""
    return (getattr(get_settings(), option.fallback) if option.fallback else None) or "no limit"


def facts(subscription: Subscription) -> list[OptionFact]:
    """The lines of the options that declare one, in their declared order."""
    values = option_values(subscription)
    lines = []
    for option in OPTIONS:
        if option.fact is None:
            continue
        value = values[option.name]
        text = (option.fact.when_null.format(fallback=_fallback(option)) if value is None
                else option.fact.when_set.format(value=value))
        lines.append(OptionFact(option.fact.label, option.name.replace("_", "-"), text,
                                muted=value is None))
    return lines
