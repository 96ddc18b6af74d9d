"""OpenTelemetry traces (CONTRACT 10.6): set-up from the standard ``OTEL_*`` variables, and
every span the service makes. The one module that imports OpenTelemetry.

Off unless the variables turn it on (:func:`wanted`): ``OTEL_TRACES_EXPORTER``
(``otlp``, ``console``, or both, comma-separated; ``none``: off), or an OTLP
endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)
with the exporter left unset (then ``otlp``). ``OTEL_SDK_DISABLED=true`` turns it
off whatever else is set. The OTLP exporter speaks ``http/protobuf`` only; the
SDK reads the rest itself (``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_BSP_*``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_SERVICE_NAME``, which defaults to
``webhooks`` here).

Off, the cost is one test of a module global per call site: :func:`on`
answers from it after its first call, and no span, context or link object is
made. The decision is taken once per process, at the first call (so after a
fork: a Celery child sets up its own exporter thread).

The spans:

- ``webhooks.emit`` (PRODUCER), one per event, a child of the caller's
  current span (:func:`emit_span`, :func:`start_emit_span`);
- ``webhooks.replay`` (PRODUCER), one per replay: the root of a new trace,
  linked to the original delivery's (:func:`replay_trace_context`);
- ``webhooks.attempt`` (CLIENT), one per attempt, a child of the span whose
  W3C ``traceparent`` is stored with the delivery (``deliveries.trace_context``),
  so that every attempt lands in its event's trace whichever worker makes it
  and however much later, with or without a broker message (:func:`attempt_span`).

If the process already has an SDK tracer provider when tracing turns on (an
application that emits events and set up OpenTelemetry itself), its spans go
through that one; otherwise this module installs its own as the global one.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from urllib.parse import urlsplit, urlunsplit

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (BatchSpanProcessor, ConsoleSpanExporter,
                                            SimpleSpanProcessor)
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from webhooks.errors import ConfigError

__all__ = ["on", "wanted", "check", "reset", "flush", "emit_span", "start_emit_span", "emitted",
           "end_failed", "current_trace_context", "replay_trace_context", "attempt_span", "attempted",
           "traceparent_header", "log_ids", "url_without_credentials"]

SUPPORTED_PROTOCOL = "http/protobuf"
DEFAULT_SERVICE_NAME = "webhooks"

_on: bool | None = None  # None: not decided yet in this process
_tracer: trace.Tracer | None = None
_own_provider: TracerProvider | None = None
_made: list[TracerProvider] = []  # every provider this module made (reset() makes another)
_lock = threading.Lock()
_propagator = TraceContextTextMapPropagator()
_ROOT = otel_context.Context()  # an empty context: a span started in it begins a new trace


# --- set-up -------------------------------------------------------------------------------
def wanted(env: Mapping[str, str]) -> bool:
    """Whether the OTEL_* variables of ``env`` turn tracing on (the module docstring)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = _exporter_names(env)
    if exporters is not None:
        return bool(exporters)
    return any(env.get(name, "").strip() for name in
               ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def _exporter_names(env: Mapping[str, str]) -> list[str] | None:
    """OTEL_TRACES_EXPORTER's names (``none`` dropped); None when it is unset."""
    given = env.get("OTEL_TRACES_EXPORTER", "").strip()
    if not given:
        return None
    return [name for name in (part.strip().lower() for part in given.split(",")) if name != "none"]


def check(env: Mapping[str, str]) -> None:
    """ConfigError naming the variable if ``env`` turns tracing on with an exporter or a
    protocol this service cannot use; nothing is set up (a process checks at start-up,
    before it forks, and sets up at its first span)."""
    if not wanted(env):
        return
    for name in _exporter_names(env) or ["otlp"]:
        if name not in ("otlp", "console"):
            raise ConfigError(f"OTEL_TRACES_EXPORTER: {name!r} is not an exporter this "
                              "service has: use otlp, console or none")
        if name == "otlp":
            protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or SUPPORTED_PROTOCOL).strip()
            if protocol != SUPPORTED_PROTOCOL:
                raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not "
                                  f"supported: use {SUPPORTED_PROTOCOL}")


def on() -> bool:
    """Whether this process traces; decided (and set up) at the first call."""
    return _on if _on is not None else _set_up(os.environ)


def _set_up(env: Mapping[str, str]) -> bool:
    global _on, _tracer, _own_provider
    with _lock:
        if _on is not None:
            return _on
        if not wanted(env):
            _on = False
            return False
        check(env)
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider) or provider in _made:
            provider = _own_provider = _new_provider(env)
            _made.append(provider)
            if not isinstance(trace.get_tracer_provider(), TracerProvider):
                trace.set_tracer_provider(provider)
        _tracer = provider.get_tracer("webhooks")
        _on = True
        return True


def _new_provider(env: Mapping[str, str]) -> TracerProvider:
    """A tracer provider exporting as OTEL_TRACES_EXPORTER says (default ``otlp``);
    ConfigError naming the variable for an exporter or protocol it cannot use."""
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": DEFAULT_SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    for name in _exporter_names(env) or ["otlp"]:  # check() accepted them
        if name == "otlp":
            provider.add_span_processor(BatchSpanProcessor(_otlp_exporter()))
        else:
            provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    return provider


def _otlp_exporter():
    # Imported only when exporting over OTLP: it pulls in protobuf and requests' session.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    return OTLPSpanExporter()


def flush(timeout_ms: int = 5000) -> None:
    """Export the spans this process still holds (before it exits); nothing if off."""
    if _on and _own_provider is not None:
        _own_provider.force_flush(timeout_ms)


def reset() -> None:
    """Forget the decision (tests: the variables changed), after exporting what is held."""
    global _on, _tracer
    with _lock:
        if _own_provider is not None:
            _own_provider.force_flush(5000)
            _own_provider.shutdown()
        _on, _tracer = None, None


# --- trace contexts, as stored with a delivery ------------------------------------------
def _trace_context_of(span: Span) -> str | None:
    """The W3C traceparent of ``span`` (55 characters), None for an invalid one."""
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, trace.set_span_in_context(span, _ROOT))
    return carrier.get("traceparent")


def _context_from(trace_context: str | None) -> otel_context.Context:
    """The context whose parent is the span ``trace_context`` names; empty (a new trace)
    for None or a malformed value."""
    if not trace_context:
        return _ROOT
    return _propagator.extract({"traceparent": trace_context}, context=_ROOT)


def current_trace_context() -> str | None:
    """The traceparent of the current span (an emit_span's), None when off or none is."""
    if not on():
        return None
    return _trace_context_of(trace.get_current_span())


# --- webhooks.emit ------------------------------------------------------------------------
def _emit_attributes(account_id: str, event_type: str) -> dict:
    return {"webhooks.account_id": str(account_id), "webhooks.event_type": str(event_type)}


@contextlib.contextmanager
def emit_span(account_id: str, event_type: str) -> Iterator[Span]:
    """The ``webhooks.emit`` span of one event, current while the block runs (a child of
    the caller's current span); an exception leaving the block marks it ERROR. Call
    :func:`emitted` with what was stored. Only when :func:`on`."""
    with _tracer.start_as_current_span("webhooks.emit", kind=SpanKind.PRODUCER,
                                       attributes=_emit_attributes(account_id, event_type)) as span:
        yield span


def start_emit_span(account_id: str, event_type: str) -> tuple[Span, str | None]:
    """A ``webhooks.emit`` span started (not current: one of a batch, emit_events), a child
    of the caller's current span, and its traceparent. End it with :func:`emitted`."""
    span = _tracer.start_span("webhooks.emit", kind=SpanKind.PRODUCER,
                              attributes=_emit_attributes(account_id, event_type))
    return span, _trace_context_of(span)


def emitted(span: Span, event_id: str, deliveries: int, *, end: bool = False) -> None:
    """Record on an emit span the stored event's id and how many deliveries it made."""
    span.set_attribute("webhooks.event_id", str(event_id))
    span.set_attribute("webhooks.deliveries", deliveries)
    if end:
        span.end()


def end_failed(span: Span, error: BaseException) -> None:
    """End a span started with :func:`start_emit_span` whose emit raised ``error``."""
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    span.end()


# --- webhooks.replay ----------------------------------------------------------------------
def replay_trace_context(original_trace_context: str | None, *, delivery_id: str,
                         replay_of: str, event_id: str, subscription_id: str) -> str | None:
    """Start and end a ``webhooks.replay`` span, the root of the replay's new trace, linked
    to the original delivery's span (when it had one); its traceparent, which the replay
    stores. None when off."""
    if not on():
        return None
    original = trace.get_current_span(_context_from(original_trace_context)).get_span_context()
    links = [Link(original)] if original.is_valid else []
    span = _tracer.start_span(
        "webhooks.replay", context=_ROOT, kind=SpanKind.PRODUCER, links=links,
        attributes={"webhooks.delivery_id": delivery_id, "webhooks.replay_of": replay_of,
                    "webhooks.event_id": event_id, "webhooks.subscription_id": subscription_id})
    span.end()
    return _trace_context_of(span)


# --- webhooks.attempt ---------------------------------------------------------------------
def url_without_credentials(url: str) -> str:
    """``url`` with its user and password, if any, replaced by ``REDACTED`` (as the
    semantic conventions ask of ``url.full``)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"REDACTED:REDACTED@{host}"))


def _server(url: str) -> dict:
    parts = urlsplit(url)
    found = {"server.address": parts.hostname or ""}
    try:
        if parts.port is not None:
            found["server.port"] = parts.port
    except ValueError:  # a port out of range: the sender refused it already
        pass
    return found


@contextlib.contextmanager
def attempt_span(trace_context: str | None, *, delivery_id: str, subscription_id: str,
                 attempt: int, url: str) -> Iterator[Span]:
    """The ``webhooks.attempt`` span of one attempt, current while the block runs: a child
    of the span ``trace_context`` names (the delivery's stored one), else the root of a
    trace of its own. Call :func:`attempted` with its outcome. Only when :func:`on`."""
    attributes = {"webhooks.delivery_id": delivery_id, "webhooks.subscription_id": subscription_id,
                  "webhooks.attempt": attempt, "http.request.method": "POST",
                  "url.full": url_without_credentials(url), **_server(url)}
    with _tracer.start_as_current_span("webhooks.attempt", context=_context_from(trace_context),
                                       kind=SpanKind.CLIENT, attributes=attributes) as span:
        yield span


def attempted(span: Span, outcome: str, status_code: int | None, error: str | None,
              succeeded: bool) -> None:
    """Record an attempt's outcome on its span; status ERROR (with ``error``, or the
    status code, as description) when it did not succeed."""
    span.set_attribute("webhooks.outcome", outcome)
    if status_code is not None:
        span.set_attribute("http.response.status_code", status_code)
    if not succeeded:
        span.set_status(Status(StatusCode.ERROR,
                               error or (f"HTTP {status_code}" if status_code else outcome)))


def traceparent_header() -> str | None:
    """The current span's W3C traceparent, for a delivery's ``traceparent`` header."""
    return _trace_context_of(trace.get_current_span()) if _on else None


# --- log lines ----------------------------------------------------------------------------
def log_ids() -> dict[str, str] | None:
    """``trace_id`` and ``span_id`` (hex) of the current span, for a log line; None when off
    or no span is current."""
    if not _on:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return {"trace_id": format(context.trace_id, "032x"), "span_id": format(context.span_id, "016x")}
