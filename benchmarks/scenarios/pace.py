"""Scenario pace (optional): the adaptive pace against a receiver that serves C requests/s.

A local receiver (in this process, one thread per connection) accepts at
most C requests in each one-second window and answers the rest 429 with
``Retry-After: 1``. A backlog of ``pace_deliveries`` deliveries to it is
inserted in bulk and published, then a service worker (the scenario pool,
with beat) drains it, once with the adaptive pace on and once off
(WEBHOOKS_ADAPTIVE_PACE), for C = 20 and C = 200.

Both legs use a short ladder of many steps (WEBHOOKS_RETRY_DELAYS, 20 retries
of 1 to 8 s), so that a 429 costs seconds rather than the default ladder's
minutes, and WEBHOOKS_PAUSE_AFTER is high (a 429 counts toward the pause on
both legs). Reported per leg: deliveries per second (from the first request
to the last accepted one), the share of attempts answered 429 over the whole
leg and once the pace has settled (from SETTLE_S seconds after the first
request on), the seconds to drain the backlog, the deliveries left dead, and
the subscription's current in-flight limit and paced rate at the end.
Target (issue 26): with the pace on, at least 0.9 C reached and under 5 % of
the settled attempts answered 429.
"""

from __future__ import annotations

import http.server
import threading
import time

from sqlalchemy.engine import make_url

from .. import seed, services
from ..context import Context
from ..meter import Meter
from . import Row
from .common import fmt

PATH = "/limited"
CAPACITIES = (20, 200)
SETTLE_S = 5.0  # seconds from the first request after which the pace counts as settled
LADDER = "1,1,1,1,1,2,2,2,2,2,4,4,4,4,4,8,8,8,8,8"


class LimitedReceiver:
    """Accepts at most ``capacity`` requests per one-second window; 429 beyond.

    Counts accepted and refused requests, and the distinct deliveries accepted
    (by the delivery id header) with the time of the last one.
    """

    def __init__(self, capacity: int, delivery_header: str):
        self.capacity = capacity
        self.lock = threading.Lock()
        self.window_start = 0.0
        self.in_window = 0
        self.accepted = 0
        self.refused = 0
        self.delivered: set[str] = set()
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.answers: list[tuple[float, bool]] = []  # (monotonic time, accepted) per request
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                accepted = receiver._admit(self.headers.get(delivery_header, ""))
                self.send_response(200 if accepted else 429)
                if not accepted:
                    self.send_header("Retry-After", "1")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def _admit(self, delivery_id: str) -> bool:
        now = time.monotonic()
        with self.lock:
            if self.first_at is None:
                self.first_at = now
            if now - self.window_start >= 1.0:
                self.window_start, self.in_window = now, 0
            if self.in_window >= self.capacity:
                self.refused += 1
                self.answers.append((now, False))
                return False
            self.answers.append((now, True))
            self.in_window += 1
            self.accepted += 1
            if delivery_id not in self.delivered:
                self.delivered.add(delivery_id)
                self.last_at = now
            return True

    def settled_share_refused(self, settle_s: float) -> float | None:
        """The share of requests refused from ``settle_s`` seconds after the first on."""
        if self.first_at is None:
            return None
        later = [accepted for at, accepted in self.answers if at >= self.first_at + settle_s]
        return round(later.count(False) / len(later), 4) if later else None

    def timeline(self) -> list[tuple[int, int]]:
        """(accepted, refused) in each second from the first request on."""
        if self.first_at is None:
            return []
        seconds: dict[int, list[int]] = {}
        for at, accepted in self.answers:
            counts = seconds.setdefault(int(at - self.first_at), [0, 0])
            counts[0 if accepted else 1] += 1
        return [tuple(seconds.get(i, (0, 0))) for i in range(max(seconds) + 1)]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _final_state(subscription_id: str) -> tuple[int | None, float | None, int]:
    """(the subscription's stored in-flight limit, its rate now, deliveries dead) at the end
    of a leg."""
    from sqlalchemy import func, select

    from webhooks.services.subscriptions import option_values
    from webhooks.storage.db import session_scope
    from webhooks.storage.models import Delivery, Subscription

    with session_scope() as session:
        subscription = session.get(Subscription, subscription_id)
        limit, rate = subscription.in_flight_limit, option_values(subscription)["current_rate_limit"]
        dead = session.scalar(select(func.count()).select_from(Delivery).where(
            Delivery.subscription_id == subscription_id, Delivery.status == "dead"))
    return limit, rate, dead


def _drain(receiver: LimitedReceiver, subscription_id: str, n: int, deadline: float,
           worker, database: str) -> dict:
    """Wait until each delivery arrived or ended dead (the ladder ran out on 429s), or the
    deadline; what the drain cost per delivery that arrived: PostgreSQL commits and CPU
    and the worker's CPU (meter.py; its start-up excluded, the sweep's process not counted)."""
    from webhooks.storage.db import get_engine

    with get_engine().connect() as connection:
        connection = connection.execution_options(isolation_level="AUTOCOMMIT")
        meter = Meter(connection, database, {"worker": [worker.pid]}, wal=False)
        meter.start()
        while (len(receiver.delivered) + _final_state(subscription_id)[2] < n
               and time.monotonic() < deadline):
            time.sleep(1.0)
            meter.sample()
        meter.stop()
        figures = meter.per_delivery(len(receiver.delivered))
    return {key: figures[key] for key in COST_KEYS}


COST_KEYS = ("pg_commits_per_delivery", "pg_cpu_ms_per_delivery", "worker_cpu_ms_per_delivery")


def measure(ctx: Context, capacity: int, adaptive: bool, n: int) -> dict:
    from webhooks.config import get_settings

    ctx.reset()
    receiver = LimitedReceiver(capacity, get_settings().header("Delivery-Id"))
    try:
        target = seed.make_target(receiver.url(PATH), f"pace-{capacity}")
        ids = seed.bulk_deliveries(target, n)
        services.analyse(ctx.options.database_url)
        seed.publish_deliveries(ids)
        leg = f"pace-{capacity}-{'on' if adaptive else 'off'}"
        worker, beat = ctx.start_worker_and_beat(
            ctx.options.scenario_pool, leg, WEBHOOKS_ADAPTIVE_PACE=str(adaptive).lower(),
            WEBHOOKS_RETRY_DELAYS=LADDER, WEBHOOKS_PAUSE_AFTER=1_000_000,
            WEBHOOKS_SWEEP_INTERVAL=ctx.sizes.sweep_interval)
        deadline = time.monotonic() + n / capacity * 4 + 120
        try:
            cost = _drain(receiver, target.subscription_id, n, deadline, worker,
                          make_url(ctx.options.database_url).database)
        finally:
            ctx.stop(worker, beat)
        limit, rate, dead = _final_state(target.subscription_id)
        seconds = (receiver.last_at - receiver.first_at
                   if receiver.first_at is not None and receiver.last_at is not None else None)
        attempts = receiver.accepted + receiver.refused
        delivered = len(receiver.delivered)
        return {
            "capacity": capacity, "adaptive": adaptive, "n": n, "delivered": delivered,
            "seconds": None if not seconds else round(seconds, 2),
            "rate_per_s": None if not seconds else round(delivered / seconds, 1),
            "share_429": None if not attempts else round(receiver.refused / attempts, 3),
            "settled_share_429": receiver.settled_share_refused(SETTLE_S),
            "of_capacity": None if not seconds else round(delivered / seconds / capacity, 3),
            "attempts": attempts, "dead": dead, "limit_at_end": limit,
            "rate_at_end": None if rate is None else round(rate, 2),
            **cost, "timeline": receiver.timeline(),
        }
    finally:
        receiver.stop()


def run(ctx: Context) -> dict:
    n = ctx.sizes.pace_deliveries
    legs = []
    for capacity in ((ctx.sizes.pace_capacity,) if ctx.sizes.pace_capacity else CAPACITIES):
        for adaptive in [leg == "on" for leg in ctx.sizes.pace_legs.split(",")]:
            leg = measure(ctx, capacity, adaptive, n)
            legs.append(leg)
            print(f"  pace C={capacity} adaptive {'on ' if adaptive else 'off'}: "
                  f"{fmt(leg['rate_per_s'])} deliveries/s ({fmt(leg['of_capacity'], '.2f')} C), "
                  f"{fmt(leg['share_429'], '.1%')} answered 429 "
                  f"({fmt(leg['settled_share_429'], '.1%')} once settled), "
                  f"{fmt(leg['seconds'])} s to drain {leg['delivered']}/{n} "
                  f"({leg['dead']} dead, in-flight limit at end {leg['limit_at_end']}, "
                  f"rate at end {leg['rate_at_end']}; per delivery: "
                  f"{fmt(leg['pg_commits_per_delivery'], '.2f')} commits, worker CPU "
                  f"{fmt(leg['worker_cpu_ms_per_delivery'], '.2f')} ms, PostgreSQL CPU "
                  f"{fmt(leg['pg_cpu_ms_per_delivery'], '.2f')} ms)", flush=True)
    result = {"deliveries": n, "pool": ctx.options.scenario_pool.label, "ladder_s": LADDER,
              "legs": legs}
    ctx.results["pace"] = result
    return result


def rows(results: dict) -> list[Row]:
    r = results.get("pace")
    if not r:
        return []
    out = []
    for leg in r["legs"]:
        name = f"C={leg['capacity']}/s, adaptive {'on' if leg['adaptive'] else 'off'}"
        on = leg["adaptive"]
        out += [Row("pace", f"{name}: deliveries/s", leg["rate_per_s"], "/s"),
                Row("pace", f"{name}: of capacity", leg.get("of_capacity"), "x",
                    ">= 0.9" if on else ""),
                Row("pace", f"{name}: share answered 429", leg["share_429"]),
                Row("pace", f"{name}: share answered 429 once settled",
                    leg.get("settled_share_429"), "", "< 0.05" if on else ""),
                Row("pace", f"{name}: drain of {leg['n']}", leg["seconds"], "s"),
                Row("pace", f"{name}: PostgreSQL commits per delivery",
                    leg.get("pg_commits_per_delivery")),
                Row("pace", f"{name}: worker CPU per delivery",
                    leg.get("worker_cpu_ms_per_delivery"), "ms")]
    return out
