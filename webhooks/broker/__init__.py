"""The way to the broker: the Celery app, what is published and when, and the kombu transports."""
