"""Helpers for the dashboard tests: read forms out of pages, sign in, post with the token."""

from __future__ import annotations

import re
from html import unescape

__all__ = ["csrf_token", "inputs", "sign_in", "post_form"]

_INPUT = re.compile(r"<input\b[^>]*>", re.IGNORECASE)
_ATTRIBUTE = re.compile(r'([a-zA-Z_:-]+)="([^"]*)"')


def inputs(html: str) -> list[dict[str, str]]:
    """The attributes of every <input> of a page."""
    return [
        {name: unescape(value) for name, value in _ATTRIBUTE.findall(tag)}
        for tag in _INPUT.findall(html)
    ]


def csrf_token(html: str) -> str:
    """The CSRF token a page's forms carry."""
    for attributes in inputs(html):
        if attributes.get("name") == "csrf_token":
            return attributes["value"]
    raise AssertionError("the page has no csrf_token input")


def sign_in(client, api_key: str):
    """Sign in through the form, as a person would; returns the response after the redirect."""
    page = client.get("/dashboard/")
    assert page.status_code == 200
    return client.post(
        "/dashboard/sign-in",
        data={"csrf_token": csrf_token(page.get_data(as_text=True)), "api_key": api_key},
        follow_redirects=True,
    )


def post_form(client, page_path: str, action: str, data: dict | None = None, **kwargs):
    """POST ``data`` to ``action`` with the CSRF token read from ``page_path``."""
    page = client.get(page_path)
    assert page.status_code == 200, page.status_code
    body = {"csrf_token": csrf_token(page.get_data(as_text=True)), **(data or {})}
    return client.post(action, data=body, **kwargs)
