"""The short run of ``make cluster``: the whole cluster in network namespaces, a small
load, two faults (worker1 partitioned from PostgreSQL, the Redis primary killed), and the
checker's verdict. It needs root, ip netns, nftables, PostgreSQL 15's binaries and
redis-server: without them it skips saying why, and fails under CI (scripts/cluster-setup.sh
installs what Debian has)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid

import pytest

from cluster.services import PG_BIN, ROOT
from tests.support.services import unavailable

pytestmark = pytest.mark.cluster

LAST_LINE = re.compile(r"^cluster: events (\d+), delivered (\d+), lost (\d+), stuck (\d+), "
                       r"duplicates (\d+), faults (\d+)$")


def _missing() -> str | None:
    """Why this machine cannot run the cluster, or None."""
    if os.geteuid() != 0:
        return "the cluster needs root (network namespaces)"
    for program in ("ip", "nft", "redis-server", "runuser", "unshare"):
        if shutil.which(program) is None:
            return f"{program} is not installed (bash scripts/cluster-setup.sh)"
    if not (PG_BIN / "postgres").exists():
        return f"PostgreSQL 15's binaries are not in {PG_BIN}"
    probe = f"whcprobe{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"network namespaces are not allowed here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)
    return None


@pytest.fixture(scope="module")
def can_run():
    reason = _missing()
    if reason:
        unavailable("a cluster of network namespaces", RuntimeError(reason))


def test_the_short_run_loses_nothing_and_leaves_nothing_stuck(can_run):
    run = subprocess.Popen([sys.executable, "-m", "cluster", "--short"], cwd=ROOT, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        output, _ = run.communicate(timeout=280)
    except subprocess.TimeoutExpired:
        run.terminate()  # the run tears itself down on SIGTERM
        output, _ = run.communicate(timeout=60)
        pytest.fail(f"the short run did not end within 280 s:\n{output[-4000:]}")
    last = output.strip().splitlines()[-1] if output.strip() else ""
    counted = LAST_LINE.match(last)
    assert counted, f"no verdict line; the run said:\n{output[-4000:]}"
    events, delivered, lost, stuck, _duplicates, faults = map(int, counted.groups())
    assert (lost, stuck) == (0, 0), output[-4000:]
    assert run.returncode == 0, output[-4000:]
    assert events > 0 and delivered > 0 and faults == 2
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"whc{run.pid}-" not in namespaces  # torn down
