"""A real OTLP/HTTP trace receiver for tests: ``POST /v1/traces`` with a protobuf
``ExportTraceServiceRequest`` (decoded with ``opentelemetry-proto``), as an OpenTelemetry
Collector's ``otlphttp`` receiver takes it. It keeps every span it receives.

The OpenTelemetry Collector is not installable here; this is the part of it the exporter
talks to, with the exporter's own wire format, so the spans a test reads are the ones a
collector would have received.
"""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)

__all__ = ["ReceivedSpan", "OtlpReceiver"]

KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
STATUSES = {0: "UNSET", 1: "OK", 2: "ERROR"}


def _value(any_value):
    """An OTLP AnyValue as a Python value (the kinds our spans use)."""
    kind = any_value.WhichOneof("value")
    return None if kind is None else getattr(any_value, kind)


def _attributes(key_values) -> dict:
    return {kv.key: _value(kv.value) for kv in key_values}


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as received: ids in lower-case hex, as traceparent and log lines write them."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root span
    kind: str
    status: str
    status_message: str
    attributes: dict
    resource: dict
    links: list = field(default_factory=list)  # (trace id, span id) of each link


class OtlpReceiver:
    """Start with :meth:`start`; the exporter's endpoint is :attr:`endpoint`."""

    def __init__(self):
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                receiver._keep(ExportTraceServiceRequest.FromString(body))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """``OTEL_EXPORTER_OTLP_ENDPOINT`` for it (the exporter appends ``/v1/traces``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> "OtlpReceiver":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _keep(self, request: ExportTraceServiceRequest) -> None:
        found = []
        for resource_spans in request.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(ReceivedSpan(
                        name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(), kind=KINDS[span.kind],
                        status=STATUSES[span.status.code], status_message=span.status.message,
                        attributes=_attributes(span.attributes), resource=resource,
                        links=[(link.trace_id.hex(), link.span_id.hex()) for link in span.links]))
        with self._lock:
            self.requests += 1
            self.spans.extend(found)

    def received(self, name: str | None = None) -> list[ReceivedSpan]:
        with self._lock:
            return [span for span in self.spans if name is None or span.name == name]

    def wait_for(self, predicate, what: str, timeout: float = 30.0) -> list[ReceivedSpan]:
        """Every span received, once ``predicate(spans)`` holds; AssertionError saying
        ``what`` and what came after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            spans = self.received()
            if predicate(spans):
                return spans
            time.sleep(0.1)
        raise AssertionError(f"no {what} in {timeout} s; received: "
                             f"{[(s.name, s.attributes) for s in self.received()]}")
