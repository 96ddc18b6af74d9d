"""webhooks.storage.clock: every process reads the database's time, whatever its own clock says."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time

import pytest

from tests.support.celeryconf import ROOT


def test_sqlite_needs_no_offset(sqlite_db):
    from webhooks.storage import clock

    clock.forget()
    assert clock.offset() == 0.0


def test_the_offset_to_the_database_is_small_on_one_host(db):
    from webhooks.storage import clock

    clock.forget()
    assert abs(clock.offset()) < 0.5
    assert abs((clock.now() - dt.datetime.now(dt.timezone.utc)).total_seconds()) < 0.5


@pytest.mark.process
def test_a_host_clock_90_s_ahead_still_reads_the_database_time(db):
    """libfaketime moves this process's clock, as on the cluster's skewed worker host."""
    library = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
    if not os.path.exists(library):
        pytest.skip("libfaketime is not installed (Debian package faketime)")
    script = ("import datetime as dt; from webhooks.storage import clock;"
              "print(dt.datetime.now(dt.timezone.utc).timestamp(), clock.now().timestamp())")
    env = {**os.environ, "WEBHOOKS_DATABASE_URL": db, "LD_PRELOAD": library,
           "FAKETIME": "+90s", "FAKETIME_DONT_RESET": "1"}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True, timeout=60).stdout.split()
    host, corrected = float(out[0]), float(out[1])
    real = time.time()
    assert host - real > 80  # the faked clock is ahead
    assert abs(corrected - real) < 5  # what the service uses is the database's
