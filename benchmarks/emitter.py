"""An emitting process of the shared scenario: ``python -m benchmarks.emitter``.

``--kind service`` calls ``webhooks.emit_event`` for the given accounts in
turn (one delivery per call: each account has one subscription);
``--kind ceiling`` publishes bare ceiling messages (``ceiling_app.send``);
``--kind durable-ceiling`` stores each one's row first, committed durably
(``ceiling_app.store_row``, on the database of ``BENCH_CEILING_DATABASE_URL``).
Either runs at full speed held to a bounded backlog (``backpressure.py``)
for ``--seconds`` at most, and prints ``EMITTED <calls>`` when it stops by
itself. ``--threads N`` (service only) calls from N threads of the process,
as a web app's request threads do, each holding its share of the backlog:
their calls may share statements and commits (group commit, emit.py). It
prints ``EMITTER READY`` once its imports are done. The harness
starts it with the worker's environment (database, broker) and stops it
with SIGKILL after the measured window.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
import uuid

from .backpressure import run_gated
from .receiver import ReceiverClient

__all__ = ["main", "argv_for", "READY_MARK"]

READY_MARK = b"EMITTER READY"


def argv_for(python: str, module: str, *, port: int, path: str, backlog: int, share: int,
             seconds: float, extra: list[str] = ()) -> list[str]:
    """The command line of one emitter (``module`` is this one, or django-webhook2's)."""
    return [python, "-m", module, "--receiver-port", str(port), "--path", path,
            "--backlog", str(backlog), "--share", str(share), "--seconds", str(seconds), *extra]


def parse(description: str = __doc__) -> argparse.ArgumentParser:
    """The options every emitter takes (django-webhook2's adds its own)."""
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--receiver-port", type=int, required=True)
    parser.add_argument("--path", required=True, help="the receiver path deliveries arrive at")
    parser.add_argument("--backlog", type=int, default=1000,
                        help="messages all emitters together let wait at most")
    parser.add_argument("--share", type=int, default=1, help="how many emitters share the backlog")
    parser.add_argument("--seconds", type=float, default=300.0, help="stop after this long")
    return parser


def gated(args: argparse.Namespace, emit_one, threads: int = 1) -> None:
    """Run ``emit_one`` under the back-pressure of ``args`` from ``threads`` threads (each
    one of ``share * threads`` emitters sharing the backlog); print the calls made."""
    receiver = ReceiverClient("127.0.0.1", args.receiver_port)
    print(READY_MARK.decode(), flush=True)  # imports done: what follows is the emitting
    calls = [0] * threads

    def emitter(index: int) -> None:
        # Call numbers interleaved over the threads, so that the accounts stay round robin.
        calls[index] = run_gated(lambda i: emit_one(i * threads + index),
                                 lambda: receiver.count(args.path), backlog=args.backlog,
                                 share=args.share * threads, seconds=args.seconds)

    if threads == 1:
        emitter(0)
    else:
        running = [threading.Thread(target=emitter, args=(i,), daemon=True)
                   for i in range(threads)]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join()
    print(f"EMITTED {sum(calls)}", flush=True)


def _service(accounts: list[str]):
    from webhooks import emit_event
    from webhooks.events.samples import sample_data

    from .seed import EVENT_TYPE

    data = sample_data(EVENT_TYPE)

    def emit_one(i: int) -> None:
        emit_event(accounts[i % len(accounts)], EVENT_TYPE, data)

    return emit_one


def _ceiling(durable: bool = False):
    from .ceiling_app import DATABASE_ENV, app, prebuilt_body, send, store_row

    producer = app.producer_pool.acquire(block=True)  # one kept connection, as emit's publisher
    rows = None
    if durable:
        import psycopg2

        rows = psycopg2.connect(os.environ[DATABASE_ENV])  # commits wait for the flush
    body = prebuilt_body()

    def emit_one(_i: int) -> None:
        delivery_id = str(uuid.uuid4())
        if rows is not None:
            store_row(rows, delivery_id, body)
        send(delivery_id, producer=producer)

    return emit_one


def main(argv=None) -> None:
    parser = parse()
    parser.add_argument("--kind", choices=("service", "ceiling", "durable-ceiling"), required=True)
    parser.add_argument("--accounts", default="", help="comma-separated account ids (service)")
    parser.add_argument("--threads", type=int, default=1,
                        help="threads calling emit_event in this process (service)")
    args = parser.parse_args(argv)
    accounts = [a for a in args.accounts.split(",") if a]
    if args.kind == "service" and not accounts:
        parser.error("--kind service needs --accounts")
    if args.threads < 1 or (args.threads > 1 and args.kind != "service"):
        parser.error("--threads is 1 or more, and only for --kind service")
    if args.kind == "service":
        # The group commit's lines (every 10 s while emit_event calls form batches: how
        # many per statement) go to this emitter's log (--keep-logs keeps it).
        logging.basicConfig(level=logging.WARNING)
        logging.getLogger("webhooks.group_commit").setLevel(logging.INFO)
        gated(args, _service(accounts), args.threads)
    else:
        gated(args, _ceiling(durable=args.kind == "durable-ceiling"))


if __name__ == "__main__":
    main()
