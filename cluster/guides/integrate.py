"""docs/integrate.md, followed on the ``app`` machine: an application on a host of its own
that emits into the deployment of deploy.md (release 0.1.0, like the service).

The Flask application, the script and the command line run as the guide writes
them; the cron line runs as cron would run it; "When the broker is down" is
tried by cutting the app host off every Redis server and Sentinel (nftables,
cluster/net.py) while the rest of the deployment keeps its broker. The Django
example is not run here: nothing in it differs between one machine and several
(it was tried on one machine).
"""

from __future__ import annotations

import json
import re
import time

from .deploy import wait_received
from .follow import Failed, Report
from .site import Site
from .text import DOCS, block, command_lines

GUIDE = "integrate.md"
APP_DIR = "/opt/myapp"
VENV_PATH = f"PATH={APP_DIR}/venv/bin:$PATH"
SOURCE_ENV = "set -a; . /etc/webhooks/webhooks.env; set +a"
BROKER_HOSTS = ("redis1", "redis2", "sent1", "sent2", "sent3")
RECOVER_AFTER_S = 120  # WEBHOOKS_RECOVER_AFTER's default: the sweep re-sends pending rows this old


def prepare(site: Site) -> None:
    """The application's virtual environment, with the packages the guide names."""
    app = site["app"]
    line = re.search(r"`(pip install /path/to/webhooks-checkout[^`]*)`",
                     (DOCS / GUIDE).read_text()).group(1)
    line = " ".join(line.split()).replace("/path/to/webhooks-checkout", site.checkout("0.1.0"))
    site.follow.run(app, f"mkdir -p {APP_DIR} && /usr/bin/python3 -m venv {APP_DIR}/venv")
    site.follow.run(app, f"{VENV_PATH}; {line}")


def flask(site: Site, report: Report, account: dict) -> None:
    app = site["app"]
    app.write(f"{APP_DIR}/app.py", block(GUIDE, "Flask", language="python"))
    site.processes.start("app-flask", app, ["bash", "-c", f"cd {APP_DIR} && {SOURCE_ENV} && "
                         f"{VENV_PATH} && exec flask --app app run --port 5128"],
                         env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    _wait(site, "curl -sS -o /dev/null http://127.0.0.1:5128/")
    curl = command_lines(block(GUIDE, "Flask", 0, "sh"))[1]
    said = site.follow.run(app, curl.replace("<account id>", account["id"]))
    answer = json.loads(said)
    report.check(GUIDE, "Flask: POST /emails answers email_id and event_id",
                 {"email_id", "event_id"} <= set(answer), said.strip())
    stored = site.psql(f"SELECT count(*) FROM app_sent_emails WHERE id = '{answer['email_id']}'")
    report.check(GUIDE, "Flask: the app's row and the event committed together, the delivery "
                 "arrives", stored == "1" and wait_received(site, {answer["event_id"]}),
                 f"app_sent_emails rows {stored}")


def script(site: Site, report: Report, account: dict) -> None:
    app = site["app"]
    app.write(f"{APP_DIR}/nightly_check.py", block(GUIDE, "A script or a cron job", 0, "python"))
    runs = command_lines(block(GUIDE, "A script or a cron job", 0, "sh"))
    cli = " ".join(command_lines(block(GUIDE, "A script or a cron job", 1, "sh")))
    lines = [runs[0], *runs[1:], cli]
    said = site.follow.run(app, f"{VENV_PATH}; " + "; ".join(
        line.split(" #")[0].replace("<account id>", account["id"]) for line in lines),
        cwd=APP_DIR).strip().splitlines()
    first, again, emitted = said[0].split(), said[1].split(), json.loads(said[2])
    wanted = len(account["subscriptions"])
    report.check(GUIDE, "script: the first run emits, the second (same key) returns the same "
                 "event", first[1:] == ["new", str(wanted), "deliveries"]
                 and again[1:] == ["again", str(wanted), "deliveries"] and first[0] == again[0],
                 f"{' '.join(first)} / {' '.join(again)}")
    report.check(GUIDE, "webhooks emit prints the event id; both events arrive",
                 wait_received(site, {first[0], emitted["event_id"]}), emitted["event_id"])
    cron = block(GUIDE, "A script or a cron job", 0, "").strip()
    when, user, command = cron.split(" ", 5)[:5], cron.split(" ", 6)[5], cron.split(" ", 6)[6]
    command = command.replace("<account id>", account["id"])
    said = site.follow.run(app, f"runuser -u {user} -- {command}").split()
    report.check(GUIDE, f"the cron line ({' '.join(when)}, as {user}): the day's key sends "
                 "nothing twice", said[:2] == [first[0], "again"], " ".join(said))


def broker_down(site: Site, report: Report, account: dict) -> None:
    """The app host loses every Redis server and Sentinel (packets dropped); the scheduler's
    host does not. Which way the deliveries went (parked, or left pending for the sweep's
    recovery) is read from the script's log lines and the rows."""
    app, net = site["app"], site.machines.net
    for name in BROKER_HOSTS:
        net.partition(app.host, net.hosts[name])
    try:
        started = time.monotonic()
        result = app.sh(f"{SOURCE_ENV}; {VENV_PATH}; python nightly_check.py {account['id']} "
                        "cut-off.example.com", cwd=APP_DIR, env=site.follow.env,
                        log=site.run_dir / "logs" / "app.sh.log")
        took = time.monotonic() - started
    finally:
        net.heal(app.host)
    if result.returncode != 0:
        raise Failed(f"app: nightly_check.py with the broker cut off: {result.stderr[-800:]}")
    event = result.stdout.split()[0]
    rows = site.psql(f"SELECT status, parked, attempt_count FROM deliveries WHERE event_id = "
                     f"'{event}'").splitlines()
    said = [line for line in result.stderr.splitlines()
            if "parking" in line or "not published" in line or "not yet published" in line]
    report.check(GUIDE, "broker unreachable: the script prints its event and exits 0",
                 bool(event), f"after {took:.1f} s; its log: {' / '.join(said)[:300]}; "
                 f"deliveries (status, parked, attempts): {rows}")
    arrived = wait_received(site, {event}, timeout=RECOVER_AFTER_S + 60)
    report.check(GUIDE, "the scheduler's sweep (its host reaches the broker) sends them",
                 arrived, f"{time.monotonic() - started:.0f} s after the emit started")


def _wait(site: Site, script: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while site["app"].sh(script).returncode != 0:
        if time.monotonic() > deadline:
            raise Failed(f"app$ {script}: no answer within {timeout:g} s")
        time.sleep(0.5)
