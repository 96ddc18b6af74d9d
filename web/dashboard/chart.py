"""The overview picture: attempts per hour by outcome, drawn as an SVG string.

Pure code, no database and no Flask: :func:`hourly_buckets` turns rows of
``(hour, outcome, count)`` into one bucket per hour, and :func:`render_chart`
turns buckets into a stacked bar chart. The page inlines the SVG, so it needs
no JavaScript, no image request and no build step.

Each outcome is told apart by colour *and* by pattern (failed is striped, dead
is cross-hatched) and is named in the legend; every bar segment carries a
``<title>`` that browsers show on hover, and the ``<desc>`` sums the whole
period for screen readers.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence
from xml.sax.saxutils import escape

from webhooks.storage.rollup import floor_hour  # re-exported: the chart's hours are the rollup's

__all__ = [
    "Series",
    "SERIES",
    "OUTCOME_TO_SERIES",
    "Bucket",
    "floor_hour",
    "hourly_buckets",
    "nice_ceiling",
    "render_chart",
    "render_legend",
]


@dataclass(frozen=True)
class Series:
    """One stacked part of every bar: its key, the word shown, its colour."""

    key: str
    label: str
    colour: str
    pattern: str | None = None  # "stripes" or "cross": told apart without colour


# Bottom to top. Colours are distinguishable for the common colour-vision
# deficiencies together with the patterns on the two failure series. The
# chart counts attempts, so its words are an attempt's, not a delivery's: the
# overview's cards beside it say Done, Failed and Dead of deliveries, and one
# dead delivery is six attempts here (five "failed, retried", one "failed, last").
SERIES: tuple[Series, ...] = (
    Series("done", "Succeeded", "#2e7d32"),
    Series("retried", "Failed, retried", "#e0a100"),
    Series("failed", "Refused (4xx)", "#d35400", "stripes"),
    Series("dead", "Failed, last", "#a01020", "cross"),
)
UNIT = "attempts"  # what one bar counts, written above the y axis
_KEYS = tuple(series.key for series in SERIES)

# An attempt's recorded outcome (webhooks.lifecycle.policy.Outcome) -> the series it counts in.
OUTCOME_TO_SERIES: dict[str, str] = {
    "success": "done",
    "retry": "retried",
    "permanent_failure": "failed",
    "dead": "dead",
}


@dataclass(frozen=True)
class Bucket:
    """One hour: ``start`` (aware UTC, on the hour) and a count per series key."""

    start: dt.datetime
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.get(key, 0) for key in _KEYS)


def hourly_buckets(
    rows: Iterable[tuple[dt.datetime, str, int]], now: dt.datetime, hours: int = 24
) -> list[Bucket]:
    """``hours`` buckets ending with the hour of ``now``, oldest first.

    ``rows`` are ``(hour start, outcome, count)``; an outcome may be an attempt
    outcome (``success``, ``retry``, ...) or a series key (``done``, ...).
    Rows outside the period and unknown outcomes are ignored.
    """
    last = floor_hour(now)
    starts = [last - dt.timedelta(hours=hours - 1 - i) for i in range(hours)]
    counts: dict[dt.datetime, dict[str, int]] = {start: {} for start in starts}
    for hour, outcome, count in rows:
        key = OUTCOME_TO_SERIES.get(outcome, outcome)
        if key not in _KEYS:
            continue
        slot = counts.get(floor_hour(hour))
        if slot is not None:
            slot[key] = slot.get(key, 0) + int(count)
    return [Bucket(start, counts[start]) for start in starts]


def nice_ceiling(value: int, steps: int = 4) -> int:
    """The smallest ``steps`` x (1, 2 or 5 x 10^k) that is at least ``value`` (and at least ``steps``)."""
    value = max(int(value), 1)
    magnitude = 1
    while True:
        for factor in (1, 2, 5):
            step = factor * magnitude
            if step * steps >= value:
                return step * steps
        magnitude *= 10


def _number(value: float) -> str:
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _counted(count: int, series: Series) -> str:
    """``"3 attempts failed, retried"`` (``"1 attempt …"``)."""
    return f"{count} {UNIT if count != 1 else UNIT[:-1]} {series.label[0].lower()}{series.label[1:]}"


def _summary(buckets: Sequence[Bucket]) -> str:
    totals = {key: sum(b.counts.get(key, 0) for b in buckets) for key in _KEYS}
    parts = "; ".join(_counted(totals[series.key], series) for series in SERIES)
    return f"Last {len(buckets)} hours, attempts by outcome: {parts}."


def _patterns(prefix: str) -> list[str]:
    defs = []
    for series in SERIES:
        pid = f"{prefix}-{series.key}"
        if series.pattern == "stripes":
            defs.append(
                f'<pattern id="{pid}" width="6" height="6" patternUnits="userSpaceOnUse" '
                f'patternTransform="rotate(45)">'
                f'<rect width="6" height="6" fill="{series.colour}"/>'
                f'<rect width="2" height="6" fill="#ffffff" fill-opacity="0.55"/></pattern>'
            )
        elif series.pattern == "cross":
            defs.append(
                f'<pattern id="{pid}" width="6" height="6" patternUnits="userSpaceOnUse">'
                f'<rect width="6" height="6" fill="{series.colour}"/>'
                f'<path d="M0 0L6 6M6 0L0 6" stroke="#000000" stroke-opacity="0.45" '
                f'stroke-width="1.2"/></pattern>'
            )
    return defs


def _fill(series: Series, prefix: str) -> str:
    return f"url(#{prefix}-{series.key})" if series.pattern else series.colour


def render_chart(
    buckets: Sequence[Bucket],
    *,
    title: str = "Attempts per hour",
    id_prefix: str = "chart",
    width: int = 760,
    height: int = 260,
) -> str:
    """A stacked bar chart of ``buckets`` (oldest first) as a standalone ``<svg>`` string.

    ``id_prefix`` keeps element ids unique when a page holds several charts.
    Times are labelled in UTC.
    """
    if not buckets:
        raise ValueError("at least one bucket is needed")
    prefix = "".join(ch for ch in id_prefix if ch.isalnum() or ch in "-_") or "chart"
    left, right, top, bottom = 44, 24, 30, 80
    plot_w, plot_h = width - left - right, height - top - bottom
    base_y = top + plot_h
    highest = max(bucket.total for bucket in buckets)
    scale_max = nice_ceiling(highest)
    slot = plot_w / len(buckets)
    bar_w = max(slot * 0.72, 1.0)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-labelledby="{prefix}-title {prefix}-desc" font-family="sans-serif" font-size="11">',
        f'<title id="{prefix}-title">{escape(title)}</title>',
        f'<desc id="{prefix}-desc">{escape(_summary(buckets))}</desc>',
        "<defs>" + "".join(_patterns(prefix)) + "</defs>",
        f'<text class="axis" x="{left + 4}" y="{top - 8}" text-anchor="start" fill="#555555">'
        f"{UNIT} per hour, hours in UTC</text>",
    ]
    # Grid lines and y labels: 0, 1/4, ... of the scale.
    for i in range(5):
        value = scale_max * i / 4
        y = base_y - plot_h * i / 4
        out.append(
            f'<line x1="{left}" y1="{_number(y)}" x2="{width - right}" y2="{_number(y)}" '
            f'stroke="{"#888888" if i == 0 else "#e2e2e2"}" stroke-width="1"/>'
        )
        out.append(
            f'<text class="axis" x="{left - 6}" y="{_number(y + 4)}" text-anchor="end" fill="#555555">'
            f"{_number(value)}</text>"
        )
    # Bars, bottom to top in SERIES order.
    for index, bucket in enumerate(buckets):
        x = left + index * slot + (slot - bar_w) / 2
        y = base_y
        end = bucket.start + dt.timedelta(hours=1)
        period = f"{bucket.start:%H:%M}\u2013{end:%H:%M} UTC"
        for series in SERIES:
            count = bucket.counts.get(series.key, 0)
            if count <= 0:
                continue
            h = plot_h * count / scale_max
            y -= h
            out.append(
                f'<rect class="bar bar-{series.key}" x="{_number(x)}" y="{_number(y)}" '
                f'width="{_number(bar_w)}" height="{_number(h)}" fill="{_fill(series, prefix)}" '
                f'data-count="{count}">'
                f"<title>{escape(f'{period}: {_counted(count, series)}')}</title></rect>"
            )
        # x labels every 3 hours, counted back from the last (current) hour.
        if (len(buckets) - 1 - index) % 3 == 0:
            cx = left + index * slot + slot / 2
            out.append(
                f'<text class="axis" x="{_number(cx)}" y="{base_y + 22}" text-anchor="middle" '
                f'fill="#555555">'
                f"{bucket.start:%H:%M}</text>"
            )
    if highest == 0:
        out.append(
            f'<text x="{_number(left + plot_w / 2)}" y="{_number(top + plot_h / 2)}" '
            f'text-anchor="middle" fill="#555555" font-size="14" stroke="#ffffff" '
            f'stroke-width="6" paint-order="stroke">'
            f"No delivery attempts in the last {len(buckets)} hours</text>"
        )
    # Legend: swatch, name and the period's total for each series, in two rows of two
    # (room for the larger text the stylesheet asks for on a phone, where the chart shrinks).
    column = (width - left - right) / 2
    for index, series in enumerate(SERIES):
        total = sum(b.counts.get(series.key, 0) for b in buckets)
        x = left + column * (index % 2)
        y = height - 32 + 24 * (index // 2)
        out.append(
            f'<rect class="swatch" x="{_number(x)}" y="{y - 10}" width="12" height="12" '
            f'fill="{_fill(series, prefix)}" stroke="#333333" stroke-width="0.5"/>'
        )
        out.append(
            f'<text class="legend" x="{_number(x + 24)}" y="{y}" fill="#222222">'
            f"{escape(f'{series.label}: {total}')}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def render_legend(buckets: Sequence[Bucket]) -> str:
    """The chart's legend again, as an HTML list (``<ul class="chart-legend">``): the same
    names and totals as the SVG's own legend, for a narrow screen where the chart, and so
    every text in it, is drawn smaller (the stylesheet shows one or the other)."""
    items = []
    for series in SERIES:
        total = sum(b.counts.get(series.key, 0) for b in buckets)
        pattern = f" pattern-{series.pattern}" if series.pattern else ""
        items.append(
            f'<li><span class="swatch{pattern}" style="background-color: {series.colour}" '
            f'aria-hidden="true"></span>{escape(f"{series.label}: {total}")}</li>'
        )
    return f'<ul class="chart-legend" aria-hidden="true">{"".join(items)}</ul>'
