"""An emitter host: ``python -m cluster.emitter NAME RATE SECONDS LOG WEB_URLS``.

Emits ``email.sent`` events with ``emit_event()`` (the Python API, in this
process, as the application that embeds the service does) at RATE events a
second for SECONDS, each with an idempotency key of its own: an emit that
fails (the database or the broker unreachable) is tried again with the same
key until it succeeds, so a retry never makes a second event. Once a second
it also reads the API's list of deliveries through one of the web hosts of
WEB_URLS (comma-separated), going to the next one when a host does not
answer, as a load balancer would. One JSON line per event and per read in LOG.
Reads the account id and API key from CLUSTER_ACCOUNT_ID and CLUSTER_API_KEY.
"""

from __future__ import annotations

import json
import os
import sys
import time

import requests

from webhooks import emit_event
from webhooks.events.samples import sample_data

RETRY_PAUSE_S = 0.5
GIVE_UP_AFTER_S = 120.0  # an emit still failing after this is logged as lost by the emitter


def main(name: str, rate: float, seconds: float, log_path: str, web_urls: str) -> None:
    account_id, api_key = os.environ["CLUSTER_ACCOUNT_ID"], os.environ["CLUSTER_API_KEY"]
    webs = web_urls.split(",")
    log = open(log_path, "a", buffering=1)
    started = time.monotonic()
    next_read, web_turn, sequence = started, 0, 0
    while time.monotonic() - started < seconds:
        sequence += 1
        log.write(json.dumps(_emit(account_id, f"{name}-{sequence}")) + "\n")
        if time.monotonic() >= next_read:
            next_read += 1.0
            line, web_turn = _read(webs, web_turn, api_key)
            log.write(json.dumps(line) + "\n")
        pause = started + sequence / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    log.write(json.dumps({"t": time.time(), "done": sequence}) + "\n")


def _emit(account_id: str, key: str) -> dict:
    first = time.time()
    errors = 0
    while True:
        try:
            event = emit_event(account_id, "email.sent", sample_data("email.sent"),
                               idempotency_key=key)
            return {"t": first, "key": key, "event": event.id, "errors": errors,
                    "took": round(time.time() - first, 3)}
        except Exception as error:  # noqa: BLE001 - the database or broker is away: retry
            errors += 1
            if time.time() - first > GIVE_UP_AFTER_S:
                return {"t": first, "key": key, "event": None, "errors": errors,
                        "error": type(error).__name__}
            time.sleep(RETRY_PAUSE_S)


def _read(webs: list[str], turn: int, api_key: str) -> tuple[dict, int]:
    """GET the deliveries list from the web host whose turn it is, else the next ones."""
    failed = []
    for step in range(len(webs)):
        web = webs[(turn + step) % len(webs)]
        try:
            response = requests.get(f"{web}/api/webhooks/deliveries?limit=5", timeout=5,
                                    headers={"Authorization": f"Bearer {api_key}"})
            return ({"t": time.time(), "web": web, "status": response.status_code,
                     "failed_over": failed}, (turn + step + 1) % len(webs))
        except requests.RequestException as error:
            failed.append([web, type(error).__name__])
    return {"t": time.time(), "web": None, "status": None, "failed_over": failed}, turn + 1


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5])
