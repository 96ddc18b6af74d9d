"""Where the API lives: every route of it starts with this path."""

API_PREFIX = "/api/webhooks"
