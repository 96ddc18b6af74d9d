"""Django settings of the benchmark's django-webhook2 project.

The database and broker come from the harness (``BENCH_DW2_DATABASE_URL``,
``BENCH_DW2_BROKER_URL``). Choices a tuned production deployment makes:
``DEBUG`` off (with it, Django keeps every query in memory), persistent
database connections (``CONN_MAX_AGE``: with Django's default of 0 every
Celery task would open one). The package's own settings are left at their
defaults (events stored, 10 s request timeout, 5 retries), but for the admin
site, which this project does not have.
"""

import os
from urllib.parse import unquote, urlsplit

_DB = urlsplit(os.environ["BENCH_DW2_DATABASE_URL"])

SECRET_KEY = "benchmark-only-not-a-secret"
DEBUG = False
USE_TZ = True
ALLOWED_HOSTS: list[str] = []
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_webhook",
    "benchmarks.dw2_project.items",
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _DB.path.lstrip("/"),
        "USER": unquote(_DB.username or "postgres"),
        "PASSWORD": unquote(_DB.password or ""),
        "HOST": _DB.hostname or "127.0.0.1",
        "PORT": str(_DB.port or 5432),
        "CONN_MAX_AGE": 600,
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
DJANGO_WEBHOOK = {"MODELS": ["items.Item"], "ADMIN_SITE": None}

CELERY_BROKER_URL = os.environ["BENCH_DW2_BROKER_URL"]
CELERY_TASK_IGNORE_RESULT = True  # no result backend, as the service
