"""Time a call, and show how PostgreSQL runs the reads it makes (EXPLAIN ANALYZE, BUFFERS).

``statements_of(call)`` records every SELECT the call sends through the
service's engine; ``explain`` runs each again under ``EXPLAIN (ANALYZE,
BUFFERS)`` with the same parameters and keeps what shows whether a read
is bounded: the indexes used, the rows read, the buffers touched, the time.
"""

from __future__ import annotations

import contextlib
import re
import time

from sqlalchemy import event

from .stats import percentile

__all__ = ["timed_ms", "statements_of", "explain"]

_INDEX = re.compile(r"(?:Index Scan|Index Only Scan|Bitmap Index Scan)(?: Backward)? (?:using|on) (\w+)")
_SEQ = re.compile(r"Seq Scan on (\w+)")
_TIME = re.compile(r"Execution Time: ([\d.]+) ms")
_ROWS = re.compile(r"actual time=[\d.]+\.\.[\d.]+ rows=(\d+) loops=(\d+)")
_BUFFERS = re.compile(r"Buffers: shared (?:hit=(\d+))?\s?(?:read=(\d+))?")


def timed_ms(call, repeats: int, warmup: int = 3) -> dict:
    """Median, p95 and p99 of ``repeats`` calls of ``call()``, in ms, after ``warmup`` untimed
    ones."""
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return {"median_ms": round(percentile(samples, 50), 2), "p95_ms": round(percentile(samples, 95), 2),
            "p99_ms": round(percentile(samples, 99), 2), "runs": repeats}


def statements_of(engine, call) -> list[tuple[str, object]]:
    """The read statements (and their parameters) that one ``call()`` sends through ``engine``."""
    seen: list[tuple[str, object]] = []

    def record(_conn, _cursor, statement, parameters, _context, executemany):
        head = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
        if head in ("SELECT", "WITH") and not executemany:
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        call()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    return seen


def explain(engine, statements: list[tuple[str, object]]) -> list[dict]:
    """EXPLAIN (ANALYZE, BUFFERS) of each statement: the plan and a summary of it."""
    out = []
    with contextlib.closing(engine.raw_connection()) as connection:
        cursor = connection.cursor()
        for statement, parameters in statements:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters)
            plan = [row[0] for row in cursor.fetchall()]
            connection.rollback()
            out.append(_summary(statement, plan))
    return out


def _summary(statement: str, plan: list[str]) -> dict:
    text = "\n".join(plan)
    rows = [int(r) * int(loops) for r, loops in _ROWS.findall(text)]
    buffers = _BUFFERS.search(text)  # the first one is the top node's: the whole statement's
    hit = int(buffers.group(1) or 0) if buffers else 0
    read = int(buffers.group(2) or 0) if buffers else 0
    timing = _TIME.search(text)
    return {
        "sql": " ".join(statement.split())[:300],
        "indexes": sorted(set(_INDEX.findall(text))),
        "seq_scans": sorted(set(_SEQ.findall(text))),
        "max_rows_in_a_node": max(rows, default=0),
        "buffers": hit + read,
        "execution_ms": float(timing.group(1)) if timing else None,
        "plan": plan,
    }
