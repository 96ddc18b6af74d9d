"""django-webhook2 on the same servers: the harness's side (its Django project is ``dw2_project/``).

The package (PyPI ``django-webhook2``, imported as ``django_webhook``) is
not a dependency of the service: it is installed into a virtualenv of its
own, and the scenario runs only when named (``--scenarios
django_webhook2``) and when ``WEBHOOKS_BENCH_DJANGO_WEBHOOK2_PYTHON`` names
that virtualenv's python::

    python3 -m venv /work/dw2-venv
    /work/dw2-venv/bin/pip install 'django-webhook2==0.11.*' 'celery[redis]' psycopg2-binary
    WEBHOOKS_BENCH_DJANGO_WEBHOOK2_PYTHON=/work/dw2-venv/bin/python python -m benchmarks ...

It uses the run's PostgreSQL server with a database of its own (the run's
name + ``_dw2``: created and migrated by Django's ``migrate`` if missing,
its tables emptied before each run) and the run's Redis db unless
``WEBHOOKS_BENCH_DJANGO_WEBHOOK2_BROKER_URL`` names another (it is flushed
before each run either way, so never point it at data you keep).
"""

from __future__ import annotations

import os
import subprocess

from sqlalchemy.engine import make_url

from . import services
from .context import Context, PoolConfig
from .processes import ROOT, ManagedProcess, start_worker

__all__ = ["ENV_PYTHON", "ENV_BROKER", "DjangoWebhook2", "python_or_reason"]

ENV_PYTHON = "WEBHOOKS_BENCH_DJANGO_WEBHOOK2_PYTHON"
ENV_BROKER = "WEBHOOKS_BENCH_DJANGO_WEBHOOK2_BROKER_URL"
PROJECT = "benchmarks.dw2_project"
QUEUE = "celery"  # Celery's default queue: the package names none
PREPARE_TIMEOUT_S = 300.0


def python_or_reason() -> tuple[str | None, str]:
    """The virtualenv's python, or None and why the scenario cannot run."""
    python = os.environ.get(ENV_PYTHON, "")
    if not python:
        return None, f"{ENV_PYTHON} is not set (see benchmarks/dw2.py)"
    if not os.access(python, os.X_OK):
        return None, f"{ENV_PYTHON}={python} is not an executable"
    return python, ""


def database_url(run_database_url: str) -> str:
    """Its own database beside the run's, named ``<run's>_dw2`` (so it contains ``bench``)."""
    url = make_url(run_database_url)
    name = f"{url.database}_dw2" if "bench" in url.database else f"{url.database}_bench_dw2"
    return url.set(database=name).render_as_string(hide_password=False)


class DjangoWebhook2:
    """One run's django-webhook2: its database, environment, worker and emitter command."""

    def __init__(self, ctx: Context, python: str):
        self.ctx, self.python = ctx, python
        self.database_url = database_url(ctx.options.database_url)
        self.broker_url = os.environ.get(ENV_BROKER) or ctx.options.broker_url
        self.migrated = False
        try:  # what it empties must look like a benchmark's, as the run's own (services.py)
            services.check_targets(self.database_url, self.broker_url)
        except SystemExit as exc:
            raise RuntimeError(str(exc)) from None

    @property
    def database(self) -> str:
        return make_url(self.database_url).database

    def env(self) -> dict[str, str]:
        django_url = make_url(self.database_url).set(drivername="postgresql")
        return self.ctx.env(
            DJANGO_SETTINGS_MODULE=f"{PROJECT}.settings",
            BENCH_DW2_DATABASE_URL=django_url.render_as_string(hide_password=False),
            BENCH_DW2_BROKER_URL=self.broker_url,
        )

    def version(self) -> str:
        return self._run(["-c", "from importlib.metadata import version; "
                                "print(version('django-webhook2'))"]).strip()

    def prepare(self, path: str) -> str:
        """Empty its tables and broker, point one webhook at ``path``; the item's id to emit for.

        The first call creates and migrates the database.
        """
        services.flush_broker(self.broker_url)
        args = ["-m", f"{PROJECT}.prepare", "--url", self.ctx.receiver.url(path)]
        if not self.migrated:
            services.create_database(self.database_url)
            args.append("--migrate")
        item = self._run(args).strip().splitlines()[-1]
        self.migrated = True
        return item

    def start_worker(self, config: PoolConfig, number: int = 1) -> ManagedProcess:
        """Its Celery worker (the ``number``-th), with the same pool and log level as the
        service's."""
        return start_worker(self.ctx.registry, name=f"dw2-{config.label}-{number}", env=self.env(),
                            log_dir=self.ctx.log_dir, app=f"{PROJECT}.tasks_app", queues=QUEUE,
                            pool=config.pool, concurrency=config.concurrency,
                            loglevel=self.ctx.options.loglevel, python=self.python)

    def _run(self, args: list[str]) -> str:
        done = subprocess.run([self.python, *args], cwd=ROOT, env=self.env(), capture_output=True,
                              text=True, timeout=PREPARE_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"django-webhook2 {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        return done.stdout
