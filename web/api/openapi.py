"""``/api/webhooks/openapi.json``: the OpenAPI 3 document of this API, public."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify

from ..apidoc import documented
from ..openapi import openapi_document
from .prefix import API_PREFIX

__all__ = ["bp"]

bp = Blueprint("openapi", __name__, url_prefix=API_PREFIX)


@bp.get("/openapi.json")
@documented(
    "This document",
    description="The OpenAPI 3 document of the API, generated from its schemas.",
    public=True,
    responses={200: ("The OpenAPI document", "OpenAPIDocument")},
)
def document() -> Response:
    return jsonify(openapi_document(current_app))
