"""``python -m benchmarks.write_bound`` still measures what it says: a tiny run on a scratch
database, checking the order of what each variant writes, not any figure of a target
(docs/architecture.md, "The least a delivery can write", has the figures)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import services
from tests.support.services import PG_URL

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 180  # the run takes seconds; this only stops a hang
_SUMMARY = re.compile(r"^\s*(\w+): CPU (\d+) us, WAL (\d+) B", re.MULTILINE)


def test_a_body_is_padded_to_the_size_asked_and_stays_json():
    from benchmarks.write_bound import _padded

    body = json.dumps({"type": "reply.received", "data": {"a": 1}}).encode()
    padded = _padded(body, 1024)
    assert len(padded) == 1024
    assert json.loads(padded)["data"] == {"a": 1}
    assert _padded(body, 10) == body


def _drop(url: str) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    name = make_url(url).database
    admin = create_engine(make_url(url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.dispose()


@pytest.fixture
def bench_url():
    """A scratch database of this run whose name says bench (write_bound refuses another),
    dropped after."""
    services.check_postgres()
    url = PG_URL + "_bench_bound"
    _drop(url)
    yield url
    _drop(url)


def test_each_variant_writes_more_than_the_one_before_it(bench_url):
    """The floor writes least; the service's tables written once more than the least
    tables; a claim committed before the POST more again (WAL from pg_waldump, the medians
    of three rounds, so that the full-page images after a checkpoint in one leg do not
    decide)."""
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.write_bound", "--deliveries", "200", "--rounds", "3"],
        cwd=ROOT, env={**os.environ, "WEBHOOKS_DATABASE_URL": bench_url},
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert run.returncode == 0, run.stdout + run.stderr
    wal = {name: int(bytes_) for name, _, bytes_ in _SUMMARY.findall(run.stdout)}
    assert set(wal) == {"floor", "once", "least", "least_claimed", "least_grouped"}, run.stdout
    assert wal["floor"] < wal["least"] < wal["once"], wal
    assert wal["least"] < wal["least_claimed"], wal
    assert wal["least"] < wal["least_grouped"], wal
