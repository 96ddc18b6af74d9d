"""Property: every URL webhooks/sender/target_urls.py accepts is read the same by urlsplit and by the
transport (requests prepares it, urllib3 and urlparse read the prepared URL), so the
host checked at creation is the host a delivery connects to."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

import idna
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.examples import examples
from webhooks.sender.target_urls import as_sent, url_problem

# The characters that move the boundaries of a URL's parts, and a few ordinary ones.
_TRICKY = st.sampled_from(list("\\@#?/:%[]._-") + ["%40", "%2f", "%5c", "%31", "127.0.0.1",
                                                     "example.com", "a", "1", "::1", "ü"])
_TAIL = st.lists(_TRICKY, max_size=8).map("".join)


def _normal(host: str | None) -> str:
    host = unquote(host or "").strip("[]").lower()
    if host.isascii():
        return host
    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except idna.IDNAError:  # e.g. "%a1" unquotes to U+FFFD: no IDNA form, compared as text
        return host


@settings(max_examples=examples(500), deadline=None)
@given(scheme=st.sampled_from(["http", "https"]), tail=_TAIL)
def test_an_accepted_url_has_one_host_for_every_reader(scheme, tail):
    url = f"{scheme}://{tail}"
    if url_problem(url) is not None:
        return
    assert _normal(urlsplit(url).hostname) == _normal(as_sent(url).hostname), url


def test_the_reported_case_is_refused():
    assert "backslash" in url_problem("http://127.0.0.1\\@example.com/")
