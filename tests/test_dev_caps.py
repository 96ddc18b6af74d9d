"""`webhooks dev`'s per-account cap fits its worker: one account cannot hold every process of
the dev worker (issue 22: the cap, 20, was above the worker's 2 processes, so one tenant's two
hanging test pings held both)."""

from __future__ import annotations

import pytest

from webhooks.cli.devserver import dev_environment, process_specs
from webhooks.config import load_settings


def _worker_concurrency() -> int:
    argv = dict(process_specs(host="127.0.0.1", port=5000))["worker"]
    return int(argv[argv.index("--concurrency") + 1])


def test_the_dev_account_cap_leaves_a_process_for_other_accounts(tmp_path):
    env = dev_environment({"WEBHOOKS_DATA_DIR": str(tmp_path)}, port=5000)
    cap = load_settings(env).account_max_in_flight
    assert 1 <= cap < _worker_concurrency()


@pytest.mark.parametrize("given", ["0", "5", "20"])
def test_an_explicit_account_cap_is_kept(tmp_path, given):
    env = dev_environment({"WEBHOOKS_DATA_DIR": str(tmp_path),
                           "WEBHOOKS_ACCOUNT_MAX_IN_FLIGHT": given}, port=5000)
    assert load_settings(env).account_max_in_flight == int(given)
