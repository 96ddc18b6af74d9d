"""What `webhooks dev` and the Celery processes print: routine lines at DEBUG only.

The whole `webhooks dev` output is watched by tests/test_dev_e2e.py and
tests/test_readme_walkthrough.py; these check each quieting on its own, fast.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys

import pytest

from tests.support.devprocess import ROOT
from webhooks.cli.devserver import ROOT_WARNING, process_specs, quiet_warnings
from webhooks.cli.supervisor import Supervisor
from webhooks.config.logs import RoutineToDebug


@pytest.fixture
def beat_logger():
    logger = logging.getLogger("tests.beat")
    logger.addFilter(RoutineToDebug("Scheduler: Sending due task"))
    yield logger
    logger.filters.clear()
    logger.setLevel(logging.NOTSET)


@pytest.mark.parametrize("level, shown", [(logging.INFO, []), (logging.DEBUG, ["DEBUG"])])
def test_beats_routine_line_is_debug(beat_logger, caplog, level, shown):
    beat_logger.setLevel(level)
    with caplog.at_level(logging.DEBUG):  # the root; the logger keeps its own level
        beat_logger.info("Scheduler: Sending due task %s (%s)", "webhooks-sweep", "webhooks.sweep")
        beat_logger.info("beat: Starting...")
        beat_logger.warning("Scheduler: Sending due task %s failed", "x")  # made up: kept
    levels = {r.getMessage(): r.levelname for r in caplog.records}
    routine = [v for k, v in levels.items() if "due task webhooks-sweep" in k]
    assert routine == shown
    assert levels["beat: Starting..."] == "INFO"
    assert levels["Scheduler: Sending due task x failed"] == "WARNING"


def test_the_worker_installs_it_on_celery_beat_and_reads_webhooks_log_level(monkeypatch):
    import worker
    from webhooks.config import reset_settings_cache

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    per_task = {name: logging.getLogger(name).level for name in worker.PER_TASK_LOGGERS}
    monkeypatch.setenv("WEBHOOKS_LOG_LEVEL", "DEBUG")
    reset_settings_cache()
    try:
        worker._json_logs(loglevel=logging.INFO)  # celery's --loglevel INFO, as in the Procfile
        assert root.level == logging.DEBUG  # WEBHOOKS_LOG_LEVEL, set, wins
        assert worker.BEAT_ROUTINE in logging.getLogger("celery.beat").filters
        monkeypatch.delenv("WEBHOOKS_LOG_LEVEL")
        worker._json_logs(loglevel=logging.WARNING)
        assert root.level == logging.WARNING  # unset: celery's --loglevel
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, was in per_task.items():
            logging.getLogger(name).setLevel(was)
        logging.getLogger("celery.beat").removeFilter(worker.BEAT_ROUTINE)


def test_the_file_broker_connects_without_kombus_hostname_warning(tmp_path, caplog):
    from kombu import Connection

    folder = str(tmp_path)
    connection = Connection("filesystem://", transport="webhooks.broker.filebroker:Transport",
                            transport_options={"data_folder_in": folder,
                                               "data_folder_out": folder})
    with caplog.at_level(logging.WARNING, logger="kombu.connection"):
        shown = connection.as_uri()
        connection.clone().info()
    assert caplog.records == []
    # Not kombu's "webhooks.broker.filebroker:Transport://:**@localhost//", whose mask (a
    # password a folder does not have) the worker's JSON log showed as ":[redacted]@".
    assert shown == "filesystem://"


@pytest.mark.process
def test_the_worker_names_the_file_broker_without_a_masked_password(tmp_path):
    """What the worker logs on connecting ("Connected to ...") and prints in its banner."""
    script = ("import logging, sys; from webhooks.broker.celery_app import get_app; "
              "from webhooks.config.logs import JsonFormatter; "
              "uri = get_app().connection_for_write().as_uri(); "
              "record = logging.LogRecord('celery', 20, '', 0, 'Connected to %s', (uri,), None); "
              "print(JsonFormatter().format(record))")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("WEBHOOKS_")},
           "WEBHOOKS_DATA_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True, timeout=60).stdout
    assert json.loads(out)["message"] == "Connected to filesystem://"


@pytest.mark.process
def test_the_supervisor_drops_blank_lines_of_its_children():
    """Celery writes a blank line before "worker: Warm shutdown (MainProcess)": alone behind
    its prefix it was a bare ``worker |`` line at every stop."""
    out = io.StringIO()
    child = [sys.executable, "-c", "print('before'); print(); print('   '); print('after')"]
    supervisor = Supervisor([("worker", child)], env=dict(os.environ), grace=10, out=out)
    supervisor.start()
    [started] = supervisor.children
    started.process.wait(60)
    started.reader.join(60)
    shown = [line.split(" | ", 1)[1] if " | " in line else line
             for line in out.getvalue().splitlines()[1:]]  # after "worker started (pid …)"
    assert shown == ["before", "after"], out.getvalue()


def _args(specs) -> dict[str, list[str]]:
    return {name: argv[1:] for name, argv in specs}


def test_below_debug_the_three_processes_print_no_banners():
    specs = _args(process_specs(host="127.0.0.1", port=5000, log_level="INFO"))
    assert specs["worker"][:3] == ["-m", "celery", "--quiet"]
    assert specs["scheduler"][:3] == ["-m", "celery", "--quiet"]
    web = specs["web"]
    assert web[web.index("--log-level") + 1] == "warning"  # no start-up lines; errors still
    assert "--access-logfile" in web


def test_at_debug_they_print_everything():
    specs = _args(process_specs(host="127.0.0.1", port=5000, log_level="DEBUG"))
    assert "--quiet" not in specs["worker"] + specs["scheduler"]
    assert specs["web"][specs["web"].index("--log-level") + 1] == "debug"
    assert specs["worker"][specs["worker"].index("--loglevel") + 1] == "DEBUG"


def test_at_warning_the_access_log_goes_too():
    web = _args(process_specs(host="127.0.0.1", port=5000, log_level="WARNING"))["web"]
    assert "--access-logfile" not in web and web[web.index("--log-level") + 1] == "warning"


def test_the_root_warning_filter_keeps_the_users_own():
    assert quiet_warnings({}) == f"ignore:{ROOT_WARNING}"
    assert quiet_warnings({"PYTHONWARNINGS": "error"}) == f"error,ignore:{ROOT_WARNING}"
    assert ":" not in ROOT_WARNING  # a colon would end the message field of the filter
