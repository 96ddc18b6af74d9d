"""The reference of the per-subscription options, written from their declarations
(:data:`webhooks.tenants.options.OPTIONS`): for each option, what it takes (kind, bounds or
choices, null), its default, where it is set, what requests and answers say of it and its
``details``.

Printed by ``webhooks options`` and rendered on the Python reference's "Subscription
options" page (``make docs``), so docs/api.md points here instead of listing the options,
and a new option is documented by its entry alone. The text is reStructuredText that
reads as plain text too: single back-quotes are literal text (the reference's default role).
"""

from __future__ import annotations

import textwrap

from webhooks.tenants.options import OPTIONS, Kind, Option

__all__ = ["takes", "reference_lines", "reference"]


def _number(value: float | None) -> str:
    """``1000`` as ``1,000``, ``0.01`` as ``0.01``."""
    return format(value, ",g")


def takes(option: Option) -> str:
    """One line: what ``option`` takes and shows, its default and who sets it."""
    if option.kind is Kind.CHOICE:
        what = "One of " + ", ".join(f"`{choice}`" for choice in option.choices)
    else:
        kind = "a whole number" if option.kind is Kind.INTEGER else "a number"
        bounds = ""
        if option.minimum is not None and option.maximum is not None:
            bounds = f" {_number(option.minimum)} to {_number(option.maximum)}"
        what = kind + bounds
    what = what[0].upper() + what[1:]
    what += ", or null" if option.nullable else " (never null)"
    if not option.editable:
        return f"{what}. Read-only: shown in every answer, never set."
    default = "null" if option.default is None else f"`{option.default}`"
    where = "create and PATCH"
    if option.form is not None:
        where += f', and the dashboard\'s form ("{option.form.label}")'
    return f"{what}; default {default}. Set by {where}."


def reference_lines(options: tuple[Option, ...] = OPTIONS) -> list[str]:
    """The reference as lines of reStructuredText: a definition list, one item per option
    in declaration order (the order of the API's fields and the dashboard's form)."""
    lines: list[str] = []
    for option in options:
        paragraphs = [takes(option)]
        if option.editable and option.description:
            paragraphs.append(f"In requests: {option.description}.")
        paragraphs.append(f"In answers: {option.shown_description}.")
        if option.details:
            paragraphs.extend(" ".join(paragraph.split())
                              for paragraph in option.details.strip().split("\n\n"))
        lines.append(f"`{option.name}`")
        for number, paragraph in enumerate(paragraphs):
            if number:
                lines.append("")
            # Never broken at a hyphen: `X-<service>-Signature` stays whole on its line.
            lines.extend(textwrap.wrap(paragraph, 88, initial_indent="    ",
                                       subsequent_indent="    ", break_long_words=False,
                                       break_on_hyphens=False))
        lines.append("")
    return lines


def reference(options: tuple[Option, ...] = OPTIONS) -> str:
    """:func:`reference_lines` as one text, as ``webhooks options`` prints it."""
    return "\n".join(reference_lines(options))
