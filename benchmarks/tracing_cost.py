"""What tracing costs per delivery, measured in this process (CPU, microseconds).

``python -m benchmarks.tracing_cost`` starts the tests' OTLP/HTTP receiver
(tests/support/otlp_receiver.py) in a process of its own, turns tracing on
(``OTEL_EXPORTER_OTLP_ENDPOINT`` at it), and makes ``DELIVERIES`` times what
one delivery of one attempt makes: the emit span with its traceparent read
(webhooks/emit.py), the attempt span from the stored traceparent with its
outcome and the ``traceparent`` header (webhooks/services/attempt.py), and
the ids a log line reads. The CPU of this process (the exporter's thread
included: it serialises to protobuf and posts), flushed at the end, per
delivery; then the same calls with tracing off (``tracing.on()`` answers
False: nothing else runs). The shared scenario (``--scenarios shared``) with
and without the variable measures the same whole-service figure, which on a
shared machine moves by more than this.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["DELIVERIES", "traced_delivery_cpu_us"]

DELIVERIES = 5_000
ROOT = Path(__file__).resolve().parents[1]
_RECEIVER = """
import sys, time
from tests.support.otlp_receiver import OtlpReceiver
receiver = OtlpReceiver().start()
print(receiver.endpoint, flush=True)
sys.stdin.read()
"""


def _one_delivery(tracing, account_id: str, url: str) -> None:
    """The tracing calls of one event with one delivery, sent once, successfully."""
    if not tracing.on():
        return
    with tracing.emit_span(account_id, "email.sent") as span:
        stored = tracing.current_trace_context()
        tracing.emitted(span, "00000000-0000-0000-0000-000000000000", 1)
    with tracing.attempt_span(stored, delivery_id="d", subscription_id="s", attempt=1,
                              url=url) as span:
        tracing.traceparent_header()
        tracing.log_ids()
        tracing.attempted(span, "success", 200, None, succeeded=True)


def traced_delivery_cpu_us(deliveries: int = DELIVERIES) -> dict[str, float]:
    """CPU microseconds per delivery of the tracing calls, on and off."""
    from webhooks.config import tracing

    receiver = subprocess.Popen([sys.executable, "-c", _RECEIVER], cwd=ROOT,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.stdout.readline().strip()
        # Room for every span: a full queue drops spans, whose export would then not count.
        os.environ["OTEL_BSP_MAX_QUEUE_SIZE"] = str(2 * deliveries + 100)
        tracing.reset()
        figures = {}
        for label in ("on", "off"):
            if label == "off":
                del os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"]
                tracing.reset()
            _one_delivery(tracing, "a", "https://hooks.example.com/in")  # set-up, imports
            started = time.process_time()
            for _ in range(deliveries):
                _one_delivery(tracing, "a", "https://hooks.example.com/in")
            tracing.flush(30_000)
            figures[label] = (time.process_time() - started) / deliveries * 1e6
        return figures
    finally:
        receiver.stdin.close()
        receiver.wait(10)


if __name__ == "__main__":
    for label, us in traced_delivery_cpu_us().items():
        print(f"tracing {label}: {us:.2f} µs of CPU per delivery (emit span, attempt span, "
              f"export), {DELIVERIES} deliveries")
