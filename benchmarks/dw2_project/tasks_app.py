"""The Celery app of the benchmark's django-webhook2 project, as its documentation sets one up.

``celery -A benchmarks.dw2_project.tasks_app worker`` runs the package's
``fire_webhook`` task. Imported before ``django.setup()`` everywhere, so
that the package's tasks (bound to ``celery.current_app``) bind to this app.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.dw2_project.settings")

app = Celery("dw2_bench")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["django_webhook"])
