"""Small look-ups the orchestrator runs inside the control host's namespace:
``python -m cluster.probe setup|waiting|master ...``, each printing one JSON line."""

from __future__ import annotations

import json
import sys
import time

import requests


# Each path of cluster/receiver.py and the receiver (first or second) that serves it.
PATHS = {"ok": 0, "flaky": 0, "slow": 1, "fail": 1}


def setup(web: str, receivers: str, paths: str = ",".join(PATHS)) -> dict:
    """An account (through the CLI's code path) and its subscriptions (through the API of
    ``web``): one per receiver path named in ``paths`` (default: one of each kind)."""
    from webhooks.tenants.accounts import create_account
    from webhooks.storage.db import session_scope

    with session_scope() as session:
        account, api_key = create_account(session, "cluster")
        account_id = account.id
    hosts = receivers.split(",")
    urls = [f"{hosts[PATHS[path]]}/{path}" for path in paths.split(",")]
    for url in urls:
        for _ in range(30):
            try:
                response = requests.post(f"{web}/api/webhooks/subscriptions", json={"url": url},
                                         headers={"Authorization": f"Bearer {api_key}"},
                                         timeout=10)
                break
            except requests.RequestException:
                time.sleep(1)
        else:
            raise RuntimeError(f"{web} did not answer")
        if response.status_code != 201:
            raise RuntimeError(f"creating the subscription {url}: {response.status_code} "
                               f"{response.text[:300]}")
    return {"account_id": account_id, "api_key": api_key, "urls": urls}


def waiting(url: str) -> dict:
    """Deliveries not finished, by status, read from the primary."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(text(
            "SELECT status, count(*) FROM deliveries WHERE status IN ('pending', 'sending') "
            "GROUP BY status")).all()
    engine.dispose()
    return {status: count for status, count in rows}


def master(sentinels: str, name: str) -> dict:
    """The Redis master's address as the first Sentinel that answers gives it."""
    import redis

    for address in sentinels.split(","):
        try:
            client = redis.Redis(host=address, port=26379, socket_timeout=2,
                                 socket_connect_timeout=2)
            host, _port = client.sentinel_get_master_addr_by_name(name)
            return {"address": host.decode() if isinstance(host, bytes) else host}
        except Exception:  # noqa: BLE001 - ask the next Sentinel
            continue
    return {"address": None}


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    print(json.dumps({"setup": setup, "waiting": waiting, "master": master}[command](*args)))
