"""The one model the benchmark emits django-webhook2 events for."""
