"""A minimal Django project that runs django-webhook2 for the benchmark (see benchmarks/dw2.py).

Our code, not the package's: settings, one model to emit events for, the
Celery app, and the two commands the harness runs with the package's
virtualenv (``prepare``, ``emit``). Nothing here is imported by the
service or by the harness's own process.
"""
