"""Successful answers: a resource dumped with its schema, as JSON."""

from __future__ import annotations

from flask import Response, jsonify
from marshmallow import Schema

from .schema_dump import dumper

__all__ = ["json_response"]


def json_response(schema: Schema, obj, status: int = 200, headers: dict | None = None) -> Response:
    """``obj`` serialised by ``schema`` (an instance), with ``status`` and ``headers``."""
    response = jsonify(dumper(schema)(obj))
    response.status_code = status
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response
