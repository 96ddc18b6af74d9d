"""The overview chart is pure code: rows in, buckets; buckets in, an SVG string out."""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET

import pytest

from web.dashboard.chart import (
    SERIES,
    Bucket,
    floor_hour,
    hourly_buckets,
    nice_ceiling,
    render_chart,
    render_legend,
)

SVG = "{http://www.w3.org/2000/svg}"
NOW = dt.datetime(2026, 7, 30, 9, 41, 7, tzinfo=dt.timezone.utc)


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # raises if the SVG is not well-formed XML


def bars(root: ET.Element, key: str | None = None) -> list[ET.Element]:
    found = [r for r in root.iter(f"{SVG}rect") if "bar" in r.get("class", "").split()]
    return [r for r in found if key is None or f"bar-{key}" in r.get("class", "").split()]


def test_floor_hour_cuts_to_the_hour_in_utc():
    paris = dt.timezone(dt.timedelta(hours=2))
    assert floor_hour(dt.datetime(2026, 7, 30, 11, 41, tzinfo=paris)) == dt.datetime(
        2026, 7, 30, 9, tzinfo=dt.timezone.utc
    )
    with pytest.raises(ValueError):
        floor_hour(dt.datetime(2026, 7, 30, 9, 41))


def test_buckets_cover_24_hours_ending_with_the_current_one():
    rows = [
        (dt.datetime(2026, 7, 30, 9, tzinfo=dt.timezone.utc), "success", 5),
        (dt.datetime(2026, 7, 30, 9, tzinfo=dt.timezone.utc), "retry", 2),
        (dt.datetime(2026, 7, 30, 8, tzinfo=dt.timezone.utc), "dead", 1),
        (dt.datetime(2026, 7, 29, 10, tzinfo=dt.timezone.utc), "permanent_failure", 3),
        (dt.datetime(2026, 7, 29, 9, tzinfo=dt.timezone.utc), "success", 99),  # 25 h ago: out
        (dt.datetime(2026, 7, 30, 9, tzinfo=dt.timezone.utc), "bogus", 7),  # unknown: ignored
    ]
    buckets = hourly_buckets(rows, NOW)
    assert len(buckets) == 24
    assert buckets[0].start == dt.datetime(2026, 7, 29, 10, tzinfo=dt.timezone.utc)
    assert buckets[-1].start == dt.datetime(2026, 7, 30, 9, tzinfo=dt.timezone.utc)
    assert buckets[-1].counts == {"done": 5, "retried": 2}
    assert buckets[-2].counts == {"dead": 1}
    assert buckets[0].counts == {"failed": 3}
    assert sum(b.total for b in buckets) == 11


@pytest.mark.parametrize("value, expected", [(0, 4), (1, 4), (4, 4), (5, 8), (9, 20), (37, 40),
                                             (41, 80), (799, 800), (801, 2000)])
def test_nice_ceiling(value, expected):
    assert nice_ceiling(value) == expected


def test_the_svg_stacks_each_hour_by_outcome_with_heights_in_proportion():
    start = floor_hour(NOW) - dt.timedelta(hours=23)
    buckets = [Bucket(start + dt.timedelta(hours=i), {}) for i in range(24)]
    buckets[-1] = Bucket(buckets[-1].start, {"done": 30, "retried": 6, "failed": 2, "dead": 2})
    buckets[5] = Bucket(buckets[5].start, {"done": 10})
    root = parse(render_chart(buckets, title="Attempts <per> hour"))

    assert root.tag == f"{SVG}svg" and root.get("role") == "img"
    assert root.find(f"{SVG}title").text == "Attempts <per> hour"  # escaped, then read back
    desc = root.find(f"{SVG}desc").text
    assert desc == ("Last 24 hours, attempts by outcome: 40 attempts succeeded; 6 attempts failed, "
                    "retried; 2 attempts refused (4xx); 2 attempts failed, last.")
    assert len(bars(root)) == 5
    done_last = [r for r in bars(root, "done") if r.get("data-count") == "30"][0]
    done_early = [r for r in bars(root, "done") if r.get("data-count") == "10"][0]
    assert float(done_last.get("height")) == pytest.approx(3 * float(done_early.get("height")))
    # Stacked bottom to top: done, retried, failed, dead.
    stack = [bars(root, s.key)[-1] for s in SERIES]
    tops = [float(r.get("y")) for r in stack]
    assert tops == sorted(tops, reverse=True)
    for lower, upper in zip(stack, stack[1:]):
        assert float(upper.get("y")) + float(upper.get("height")) == pytest.approx(
            float(lower.get("y")), abs=0.11)
    # Hover text names the hour and the count; failures are patterned, not colour alone.
    assert (bars(root, "dead")[0].find(f"{SVG}title").text
            == "09:00\u201310:00 UTC: 2 attempts failed, last")
    assert bars(root, "dead")[0].get("fill").startswith("url(#")
    # It counts attempts, and says so: not the words of the delivery cards beside it.
    legend = [t.text for t in root.iter(f"{SVG}text")]
    assert "Succeeded: 40" in legend and "Failed, last: 2" in legend
    assert "attempts per hour, hours in UTC" in legend
    assert not {"Done", "Failed", "Dead"} & {text.split(":")[0] for text in legend}


def test_the_html_legend_names_the_same_series_and_totals_as_the_svg_s():
    start = floor_hour(NOW) - dt.timedelta(hours=23)
    buckets = [Bucket(start + dt.timedelta(hours=i), {"done": 2, "dead": 1}) for i in range(24)]
    legend = ET.fromstring(render_legend(buckets))  # well-formed
    assert legend.tag == "ul" and legend.get("class") == "chart-legend"
    items = ["".join(item.itertext()) for item in legend]
    svg_legend = [t.text for t in parse(render_chart(buckets)).iter(f"{SVG}text")
                  if t.get("class") == "legend"]
    assert items == svg_legend == ["Succeeded: 48", "Failed, retried: 0", "Refused (4xx): 0",
                                   "Failed, last: 24"]
    patterns = [item.find("span").get("class") for item in legend]
    assert patterns == ["swatch", "swatch", "swatch pattern-stripes", "swatch pattern-cross"]


def test_an_empty_period_says_so():
    start = floor_hour(NOW) - dt.timedelta(hours=23)
    root = parse(render_chart([Bucket(start + dt.timedelta(hours=i)) for i in range(24)]))
    assert bars(root) == []
    assert any("No delivery attempts" in (t.text or "") for t in root.iter(f"{SVG}text"))


def test_ids_use_the_prefix_so_two_charts_can_share_a_page():
    buckets = [Bucket(floor_hour(NOW), {"dead": 1})]
    svg = render_chart(buckets, id_prefix='x"><script>')
    assert "<script>" not in svg
    root = parse(svg)
    assert root.find(f"{SVG}title").get("id") == "xscript-title"
    with pytest.raises(ValueError):
        render_chart([])
