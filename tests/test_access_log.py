"""Issue 36, finding 8: a portal link's token never reaches gunicorn's access log (it was in
the request line, also for a HEAD that leaves the link unspent)."""

from __future__ import annotations

import datetime as dt
import http.client
import json
import logging
import types

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger

from web.access_log import PLACEHOLDER, RedactPortalTokens, install, redact_portal_tokens

TOKEN = "Qx9-fake_portal_token_5bC2kLmN0pQrStUvWxYz012345678"


@pytest.mark.parametrize("text, redacted", [
    (f"/dashboard/portal/{TOKEN}", f"/dashboard/portal/{PLACEHOLDER}"),
    (f"HEAD /dashboard/portal/{TOKEN} HTTP/1.1", f"HEAD /dashboard/portal/{PLACEHOLDER} HTTP/1.1"),
    (f"https://hooks.example.com/dashboard/portal/{TOKEN}?x=1",
     f"https://hooks.example.com/dashboard/portal/{PLACEHOLDER}?x=1"),
    (f"/mounted/dashboard%2Fportal%2f{TOKEN}", f"/mounted/dashboard%2Fportal%2f{PLACEHOLDER}"),
    ("/dashboard/subscriptions/abc", "/dashboard/subscriptions/abc"),
    ("/dashboard/portal/", "/dashboard/portal/"),
])
def test_tokens_are_redacted_and_the_rest_kept(text, redacted):
    assert redact_portal_tokens(text) == redacted


def _access_line(method: str, referer: str, *, redacted: bool = True) -> str:
    """The line gunicorn's own Logger writes for a request to a portal link, with the filter
    (or, ``redacted=False``, without any), in a format of the atoms that can hold the path."""
    config = Config()
    config.set("accesslog", "-")
    config.set("access_log_format",
               '%(h)s "%(r)s" %(s)s "%(f)s" %(U)s %({referer}i)s %({raw_uri}e)s')
    logger = Logger(config)  # its access_log is the process's "gunicorn.access" logger
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    saved = logger.access_log.filters[:]
    logger.access_log.filters[:] = [RedactPortalTokens()] if redacted else []
    logger.access_log.addHandler(handler)
    try:
        path = f"/dashboard/portal/{TOKEN}"
        environ = {"REQUEST_METHOD": method, "RAW_URI": path, "PATH_INFO": path,
                   "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "198.51.100.7",
                   "QUERY_STRING": "", "HTTP_REFERER": referer}
        response = types.SimpleNamespace(status="200 OK", sent=0, headers=[])
        request = types.SimpleNamespace(headers=[("REFERER", referer)])
        logger.access(response, request, environ, dt.timedelta(milliseconds=3))
    finally:
        logger.access_log.removeHandler(handler)
        logger.access_log.filters[:] = saved
    (record,) = records
    return record.getMessage()


REFERER = f"https://app.example.com/dashboard/portal/{TOKEN}"


@pytest.mark.parametrize("method", ["GET", "HEAD", "POST"])
def test_gunicorn_s_access_line_holds_no_token(method):
    line = _access_line(method, REFERER)
    assert TOKEN not in line
    assert f"{method} /dashboard/portal/{PLACEHOLDER} HTTP/1.1" in line
    assert line.count(PLACEHOLDER) == 5  # the request line, Referer twice, the path, RAW_URI


def test_without_the_filter_the_token_is_in_the_line():
    """The test above can fail: gunicorn writes the path as it came."""
    assert _access_line("HEAD", REFERER, redacted=False).count(TOKEN) == 5


def test_install_puts_one_filter_on_each_gunicorn_logger():
    install()
    install()
    for name in ("gunicorn.access", "gunicorn.error"):
        filters = logging.getLogger(name).filters
        assert sum(isinstance(f, RedactPortalTokens) for f in filters) == 1, name


def test_the_error_log_s_arguments_are_redacted_too():
    record = logging.LogRecord("gunicorn.error", logging.WARNING, __file__, 1,
                               "Invalid request from ip=%s: %s", ("198.51.100.7",
                               f"Invalid HTTP request line: 'GET /dashboard/portal/{TOKEN} X'"),
                               None)
    RedactPortalTokens().filter(record)
    assert TOKEN not in record.getMessage() and PLACEHOLDER in record.getMessage()


# ---------------------------------------------------------------- the Procfile's web process

@pytest.mark.process
def test_the_procfile_s_web_process_logs_portal_opens_without_the_token(db, redis_broker,
                                                                        tmp_path):
    from tests.api.helpers import new_caller
    from tests.support.devprocess import Processes, clean_env, free_port, wait_until
    from tests.support.services import PG_URL, REDIS_URL
    from tests.test_gunicorn_errors import ROOT, procfile_web_command

    port = free_port()
    env = clean_env(PORT=str(port), WEBHOOKS_DATABASE_URL=PG_URL, WEBHOOKS_BROKER_URL=REDIS_URL,
                    WEBHOOKS_DATA_DIR=str(tmp_path / "data"), WEBHOOKS_SECURE_COOKIES="false",
                    WEBHOOKS_SECRET_KEY="k" * 48)
    processes = Processes(tmp_path)
    web = processes.start(["sh", "-c", procfile_web_command()], cwd=ROOT, env=env, name="web")
    try:
        caller = new_caller("acme")
        wait_until(lambda: _status(port, "GET", "/healthz") == 200, 60, "the web process")
        link = _portal_link(port, caller.api_key)
        path = link[link.index("/dashboard/portal/"):]
        token = path.rsplit("/", 1)[1]
        assert _status(port, "HEAD", path, Referer=link) == 200  # a link checker: unspent
        assert _status(port, "GET", path, Referer=link) == 302
        assert _status(port, "GET", path) == 410
        def portal_lines() -> list[str] | None:
            lines = [line for line in web.output().splitlines() if "/dashboard/portal/" in line]
            return lines if len(lines) == 3 else None

        lines = wait_until(portal_lines, 30, "the access lines of the three opens")
    finally:
        processes.kill_all()
    assert token not in web.output()
    assert [line.split('"')[1] for line in lines] == [
        f"HEAD /dashboard/portal/{PLACEHOLDER} HTTP/1.1",
        f"GET /dashboard/portal/{PLACEHOLDER} HTTP/1.1",
        f"GET /dashboard/portal/{PLACEHOLDER} HTTP/1.1"]


def _status(port: int, method: str, path: str, **headers) -> int | None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, headers=headers)
        return connection.getresponse().status
    except OSError:
        return None
    finally:
        connection.close()


def _portal_link(port: int, api_key: str) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", "/api/webhooks/portal-links", body=b"{}",
                           headers={"Authorization": f"Bearer {api_key}",
                                    "Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 201
        return json.loads(response.read())["url"]
    finally:
        connection.close()
