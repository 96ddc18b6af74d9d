"""Events over HTTP against ``emit_event`` from Python: ``python -m benchmarks.publisher_api``.

Issue 38's figure: 8 concurrent clients emit through the publisher API
(``POST /api/webhooks/accounts/<id>/events``, one event a request, kept-alive
connections) to the web process as the Procfile runs it (gunicorn, 2 workers
of 4 threads; ``--server`` names another: gunicorn's sync worker, uWSGI or granian),
against 8 threads of this process calling ``emit_event`` directly, on the
same database and broker. One subscription per event (no worker runs: the
deliveries wait on the broker, which is emptied between legs).
Each leg sends ``--events`` events; the rate counts from the first call until
the last one returned (both return only once the broker accepted the message,
CONTRACT 9.1). The legs run in alternated pairs (python/http, then http/python,
...) because this machine is shared and loaded: compare within a pair. Prints
each pair's rates, their ratio, the 202's latency (p50, p99) next to
emit_event's own call time, and each leg's CPU per event: this process (whose
threads call emit_event, or are the HTTP clients) and, apart, the web server's
processes.

Needs PostgreSQL and Redis: WEBHOOKS_DATABASE_URL (default a database named
``webhooks_bench_publisher`` on 127.0.0.1, made and migrated if missing; its
name must contain ``bench``) and WEBHOOKS_BROKER_URL (default
``redis://127.0.0.1:6379/12``; its db is flushed).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("WEBHOOKS_DATABASE_URL",
                      "postgresql+psycopg2://postgres@127.0.0.1:5432/webhooks_bench_publisher")
os.environ.setdefault("WEBHOOKS_BROKER_URL", "redis://127.0.0.1:6379/12")

from . import services  # noqa: E402  (after the environment it reads)
from .resources import group_cpu_s  # noqa: E402
from .stats import percentile  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = 8


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# The web servers the benchmark can start; "gthread" is the Procfile's (JsonErrorWorker).
SERVERS = ("gthread", "sync", "uwsgi", "granian")


def _web_command(server: str, port: int, workers: int, threads: int) -> list[str]:
    """The command line of ``server`` serving ``web:create_app()`` on 127.0.0.1:``port`` with
    ``workers`` processes of ``threads`` threads (``sync``: one thread each, ``threads``
    ignored). uWSGI speaks HTTP/1.1 with keep-alive in its workers (no router process)."""
    bin_dir = Path(sys.executable).parent
    if server == "uwsgi":
        return [os.environ.get("UWSGI", str(bin_dir / "uwsgi")), "--http11-socket", f"127.0.0.1:{port}",
                "--processes", str(workers), "--threads", str(threads), "--master",
                "--need-app", "--lazy-apps", "--die-on-term", "--disable-logging",
                "--thunder-lock", "--buffer-size", "8192", "--post-buffering", "65536",
                "--pythonpath", str(ROOT), "--virtualenv", sys.prefix,
                "--eval", "import web; application = web.create_app()"]
    if server == "granian":  # measured for issue 38; its parser's refusals are not JSON
        return [str(bin_dir / "granian"), "--interface", "wsgi", "--host", "127.0.0.1",
                "--port", str(port), "--workers", str(workers), "--blocking-threads", str(threads),
                "--no-ws", "--log-level", "warning", "--factory", "web:create_app"]
    common = [str(bin_dir / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--workers", str(workers),
              "--no-control-socket"]
    if server == "sync":
        return [*common, "--worker-class", "sync", "web:create_app()"]
    return [*common, "--threads", str(threads), "--worker-class", "web.server.JsonErrorWorker",
            "--keep-alive", "60", "web:create_app()"]


def _start_web(port: int, log: Path, server: str, workers: int, threads: int) -> subprocess.Popen:
    """The web server (the Procfile's gunicorn, 2 workers of 4 threads, unless told), on
    127.0.0.1:``port``."""
    command = _web_command(server, port, workers, threads)
    # The publisher limit is counted as in production (leases of 10 from Redis), but set
    # above any rate this machine reaches: its default, 1000 a second, would cap the HTTP
    # leg where emit_event's leg has no cap (it did, at ~1300 events/s of emit_event).
    env = {**os.environ, "WEBHOOKS_API_RATE_LIMIT": "100000 per second",
           "WEBHOOKS_PUBLISHER_RATE_LIMIT": "100000", "WEBHOOKS_LOG_LEVEL": "WARNING"}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("wb"),
                               stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{server} did not start; see {log}")


def _request(connection, method, path, headers, body=None) -> tuple[int, dict]:
    connection.request(method, path, body=json.dumps(body) if body is not None else None,
                       headers={**headers, "Content-Type": "application/json"})
    answer = connection.getresponse()
    raw = answer.read()
    return answer.status, (json.loads(raw) if raw else {})


def _seed(port: int) -> tuple[str, dict]:
    """A publisher key, and an account with one subscription made through the API."""
    from webhooks.services import publishers
    from webhooks.storage.db import session_scope

    with session_scope() as session:
        _, key = publishers.create(session, "benchmark")
    headers = {"Authorization": f"Bearer {key}"}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    status, account = _request(connection, "POST", "/api/webhooks/accounts", headers,
                               {"name": "bench"})
    assert status == 201, account
    status, made = _request(connection, "POST", "/api/webhooks/subscriptions",
                            {"Authorization": f"Bearer {account['api_key']}"},
                            {"url": "https://hooks.example.com/bench"})
    assert status == 201, made
    return account["id"], headers


def _leg(send_one, events: int) -> tuple[float, list[float]]:
    """``events`` calls of ``send_one(client_index)`` from CLIENTS threads: (events/s, each
    call's duration in s)."""
    share = [events // CLIENTS + (1 if i < events % CLIENTS else 0) for i in range(CLIENTS)]
    durations: list[list[float]] = [[] for _ in range(CLIENTS)]
    barrier = threading.Barrier(CLIENTS + 1)

    def client(index: int) -> None:
        barrier.wait()
        for _ in range(share[index]):
            started = time.perf_counter()
            send_one(index)
            durations[index].append(time.perf_counter() - started)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return events / elapsed, [d for per in durations for d in per]


def _own_cpu_s() -> float:
    """CPU seconds so far of this process: its client or emit_event threads."""
    mine = os.times()
    return mine.user + mine.system


def _measured_leg(send_one, events: int, web_pgid: int) -> tuple[float, list[float], float, float]:
    """:func:`_leg`, and the CPU it cost per event (ms), apart: this process (the clients, or
    the threads calling emit_event) and the web server's process group. CPU is a figure the
    other sessions' load disturbs less than the rates."""
    own_before, web_before = _own_cpu_s(), group_cpu_s(web_pgid)
    rate, durations = _leg(send_one, events)
    own = (_own_cpu_s() - own_before) / events * 1000
    web = (group_cpu_s(web_pgid) - web_before) / events * 1000
    return rate, durations, own, web


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="events per leg (2000)")
    parser.add_argument("--pairs", type=int, default=3, help="alternated pairs of legs (3)")
    parser.add_argument("--server", choices=SERVERS, default="gthread",
                        help="web server: the Procfile's gunicorn gthread worker (default), "
                             "gunicorn's sync worker, uWSGI ($UWSGI or the venv's uwsgi), or "
                             "granian (the venv's; pip install granian: not a dependency)")
    parser.add_argument("--web-workers", type=int, default=2, help="web processes (2)")
    parser.add_argument("--web-threads", type=int, default=4, help="threads of each (4)")
    args = parser.parse_args(argv)
    database_url, broker_url = os.environ["WEBHOOKS_DATABASE_URL"], os.environ["WEBHOOKS_BROKER_URL"]
    if "bench" not in database_url.rsplit("/", 1)[-1]:
        raise SystemExit("WEBHOOKS_DATABASE_URL must name a database with 'bench' in its name")
    services.ensure_database(database_url)
    services.truncate_tables(database_url)
    services.flush_broker(broker_url)

    from webhooks import emit_event
    from webhooks.events.samples import sample_data

    port = _free_port()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / "bench-publisher-web.log"
    web = _start_web(port, log, args.server, args.web_workers, args.web_threads)
    try:
        account_id, headers = _seed(port)
        data = sample_data("email.sent")
        body = json.dumps({"type": "email.sent", "data": data})
        path = f"/api/webhooks/accounts/{account_id}/events"
        request_headers = {**headers, "Content-Type": "application/json"}
        connections = [http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                       for _ in range(CLIENTS)]

        def over_http(index: int) -> None:
            try:
                connections[index].request("POST", path, body=body, headers=request_headers)
            except OSError:  # the server closed the idle connection: a client reconnects
                connections[index].close()
                connections[index].request("POST", path, body=body, headers=request_headers)
            answer = connections[index].getresponse()
            answer.read()
            if answer.status != 202:
                raise RuntimeError(f"the API answered {answer.status}")

        def from_python(_index: int) -> None:
            emit_event(account_id, "email.sent", data)

        legs = {"python": from_python, "http": over_http}
        _leg(over_http, 200)  # warm both paths: connections, statement caches
        _leg(from_python, 200)
        services.flush_broker(broker_url)
        print(f"{args.pairs} alternated pairs of {args.events} events, {CLIENTS} clients each; "
              f"web: {args.server} {args.web_workers} workers x {args.web_threads} threads; "
              f"{os.cpu_count()} CPUs, shared")
        print(f"{'pair':>4} {'order':>12} {'python ev/s':>12} {'http ev/s':>10} {'ratio':>6} "
              f"{'py p50/p99 ms':>14} {'202 p50/p99 ms':>15} {'CPU ms/ev: py | clients+web':>28}")
        ratios = []
        for pair in range(args.pairs):
            order = ("python", "http") if pair % 2 == 0 else ("http", "python")
            figures = {}
            for name in order:
                figures[name] = _measured_leg(legs[name], args.events, web.pid)
                services.flush_broker(broker_url)
            py_rate, py_times, py_cpu, _ = figures["python"]
            http_rate, http_times, clients_cpu, web_cpu = figures["http"]
            ratios.append(http_rate / py_rate)
            print(f"{pair + 1:>4} {'/'.join(order):>12} {py_rate:>12.0f} {http_rate:>10.0f} "
                  f"{http_rate / py_rate:>6.2f} "
                  f"{percentile(py_times, 50) * 1000:>6.2f}/{percentile(py_times, 99) * 1000:<7.2f}"
                  f"{percentile(http_times, 50) * 1000:>7.2f}/{percentile(http_times, 99) * 1000:<7.2f}"
                  f"{py_cpu:>10.2f} | {clients_cpu:.2f}+{web_cpu:.2f}")
        print(f"ratio http/python per pair: {', '.join(f'{r:.2f}' for r in ratios)}; "
              f"median {statistics.median(ratios):.2f}")
    finally:
        os.killpg(web.pid, signal.SIGTERM)
        web.wait(timeout=30)
        services.flush_broker(broker_url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
