"""Tests that need a server skip locally with the reason, and fail when CI is set."""

import pytest

from tests.support.services import unavailable


def test_missing_server_skips_without_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="Redis at x is not reachable"):
        unavailable("Redis at x", ConnectionError("refused"))


def test_missing_server_fails_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        unavailable("PostgreSQL at y", ConnectionError("refused"))
