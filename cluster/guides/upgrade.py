"""docs/upgrade.md, followed on the deployment of deploy.md: from release 0.1.0 (this
repository before migrations 0015 and 0016, schema 0014) to 0.2.0 (this checkout, at
its newest revision, ``NEW_SCHEMA``), under a steady stream of events, then back.

The app host emits 4 events a second throughout (cluster/emitter.py, with the
app's own 0.1.0 package) and reads the API's deliveries list through the
balancer once a second; the receiver logs every request. At the end the
cluster's checker (cluster/checker.py) counts what was lost, stuck or received
twice. A restart's window explains duplicates the way a fault's does in
``make cluster``.
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
import time

from alembic.script import ScriptDirectory

from .. import checker
from ..processes import _descendants
from ..services import ROOT
from .deploy import SCHEDULER_HOST, WEB_HOSTS, WORKER_HOSTS, PUBLIC, wait_received
from .follow import Report
from .site import SERVICE_HOSTS, Site
from .text import blocks, comment_of, command_lines

GUIDE = "upgrade.md"
ROLES = {"web hosts": WEB_HOSTS, "worker hosts": WORKER_HOSTS,
         "the scheduler's host": (SCHEDULER_HOST,)}
RESTART_ORDER = ("web1", "web2", "work1", "work2")
EMIT_RATE = 4.0
OLD, NEW = "0.1.0", "0.2.0"
OLD_SCHEMA = "0014"  # site.OLD_COMMIT's newest revision
# This checkout's newest revision (it was written here as 0016, and went stale at 0017).
NEW_SCHEMA = ScriptDirectory(str(ROOT / "webhooks" / "storage" / "migrations")).get_current_head()


def runs_on(line: str, host: str) -> bool:
    """A line whose comment names a role runs on that role's hosts; any other on all."""
    role = comment_of(line)
    for name, hosts in ROLES.items():
        if role.startswith(name):
            return host in hosts
    return True


def _switch(site: Site, body: str, windows: list, what: str, release: str) -> None:
    """Host after host (each host a window): web hosts by the guide's balancer block (for
    web1, and with web2 in its place), the others by the lines of ``body`` for their role."""
    drained = blocks(GUIDE, "A rolling upgrade", "sh")[3].replace(
        f"/opt/webhooks/releases/{NEW}", f"/opt/webhooks/releases/{release}")
    for host in RESTART_ORDER:
        started = time.time()
        if host in WEB_HOSTS:
            for target, line in _on_hosts(drained.replace("web1", host)):
                site.follow.run(site[target], line)
        else:
            for line in command_lines(body):
                if runs_on(line, host):
                    site.follow.run(site[host], line.split(" #")[0])
        windows.append({"name": f"{what} {host}", "start": started, "end": time.time()})


def _on_hosts(body: str) -> list[tuple[str, str]]:
    """(machine, line) for a block whose comments say where the next lines run
    (``# on the balancer: …``, ``# on web1: …``)."""
    target, found = None, []
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith("# on "):
            where = line[5:].split(":")[0]
            target = "lb" if where == "the balancer" else where
        elif line:
            found.append((target, line))
    return found


def start_emitter(site: Site, account: dict) -> None:
    app = site["app"]
    app.write("/opt/myapp/emitter.py", (ROOT / "cluster" / "emitter.py").read_text())
    command = ("set -a; . /etc/webhooks/webhooks.env; set +a; "
               f"exec /opt/myapp/venv/bin/python /opt/myapp/emitter.py app {EMIT_RATE} 3600 "
               f"{site.run_dir}/logs/emit-app.jsonl {PUBLIC}")
    site.processes.start("emitter", app, ["bash", "-c", command], env={
        "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "CLUSTER_ACCOUNT_ID": account["id"],
        "CLUSTER_API_KEY": account["api_key"], **site.follow.env})


def emitted(site: Site) -> list[dict]:
    return checker.read_lines([site.run_dir / "logs" / "emit-app.jsonl"])


def _events_between(site: Site, start: float, end: float) -> set[str]:
    return {line["event"] for line in emitted(site)
            if line.get("event") and start <= line["t"] < end}


def rolling(site: Site, report: Report, windows: list) -> None:
    """Install beside, migrate with the new release while 0.1.0 runs, switch host by host."""
    install, migrate, switch = blocks(GUIDE, "A rolling upgrade", "sh")[:3]
    install = install.replace("/path/to/webhooks-checkout-0.2.0", site.checkout(NEW))
    for host in SERVICE_HOSTS:
        site.follow.block(site[host], install)
    started = time.time()
    said = site.follow.run(site[SCHEDULER_HOST], command_lines(migrate)[0])
    report.check(GUIDE, "db upgrade of 0.2.0 while every process runs 0.1.0",
                 f"upgraded the schema from revision {OLD_SCHEMA} to {NEW_SCHEMA}" in said,
                 said.strip())
    windows.append({"name": "migration", "start": started, "end": time.time()})
    time.sleep(10)
    after = _events_between(site, time.time() - 9, time.time())
    report.check(GUIDE, f"0.1.0's workers deliver on schema {NEW_SCHEMA} (events emitted after the "
                 "migration arrive before any restart)", after and wait_received(site, after),
                 f"{len(after)} events")
    _switch(site, switch, windows, "upgrade", NEW)
    running = _running_releases(site)
    report.check(GUIDE, "every host switched and restarted: all processes run 0.2.0",
                 set(running.values()) == {NEW}, json.dumps(running))


def _running_releases(site: Site) -> dict[str, str]:
    """unit -> the release its main process runs, from /proc (the venv of its interpreter);
    "?" for a unit whose process has not exec'd its program yet after a few seconds."""
    for _ in range(10):
        found = _releases_now(site)
        if "?" not in found.values():
            break
        time.sleep(0.5)
    return found


def _releases_now(site: Site) -> dict[str, str]:
    found = {}
    for name, process in site.processes.running.items():
        if ":webhooks-" not in name or not process.alive():
            continue
        tree = [process.popen.pid, *_descendants(process.popen.pid)]
        for pid in tree:
            try:
                argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            for word in argv:
                if b"/opt/webhooks/releases/" in word:
                    found[name] = word.decode().split("/opt/webhooks/releases/")[1].split("/")[0]
            if name in found:
                break
        found.setdefault(name, "?")
    return found


def verdict(site: Site, report: Report, windows: list) -> None:
    """Stop the emitter, wait for the last deliveries, count (cluster/checker.py)."""
    site.processes.running["emitter"].signal(signal.SIGTERM)
    site.processes.running["emitter"].popen.wait(timeout=30)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and site.psql(
            "SELECT count(*) FROM deliveries WHERE status IN ('pending', 'sending')") != "0":
        time.sleep(2)
    primary = read_primary(site)
    received = checker.read_lines([site.received_log])
    result = checker.verdict(primary, emitted(site), received, windows, max_attempts=6,
                             explain_after=15 + 120 + 30, stuck_slack=120)
    report.check(GUIDE, "the rolling upgrade and rollback lost nothing, left nothing stuck",
                 result.lost == 0 and result.stuck == 0 and result.events > 0,
                 result.line().removeprefix("cluster: ") + (
                     f"; lost {result.lost_detail[:3]}" if result.lost_detail else ""))
    reads = [line for line in emitted(site) if "web" in line or "failed_over" in line]
    bad = [line for line in reads if line.get("status") != 200]
    report.check(GUIDE, "the API answered through the balancer during every restart",
                 reads and not bad, f"{len(reads)} reads, {len(bad)} not 200: "
                 f"{[(round(b['t'] - reads[0]['t']), b.get('status')) for b in bad[:5]]}")


def read_primary(site: Site) -> dict:
    out = site.run_dir / "primary.json"
    script = ("import json,sys; from cluster.checker import read_primary; rows = read_primary("
              "sys.argv[1]); rows['events'] = sorted(rows['events']); "
              "json.dump(rows, open(sys.argv[2], 'w'), default=str)")
    result = site["client"].sh(f"cd {shlex.quote(str(ROOT))} && {sys.executable} -c "
                               f"{shlex.quote(script)} {site.primary_url()} {out}")
    if result.returncode != 0:
        raise RuntimeError(f"reading the primary: {result.stderr[-1500:]}")
    rows = json.loads(out.read_text())
    rows["events"] = set(rows["events"])
    return rows


def rollback(site: Site, report: Report, windows: list, account: dict) -> None:
    """"Rolling back": the code back to 0.1.0 on the newer schema, then the schema."""
    code, schema = blocks(GUIDE, "Rolling back", "sh")[:2]
    _switch(site, code, windows, "rollback", OLD)
    schedulers = [h for h in SERVICE_HOSTS if site.systemd.is_active(site[h], "webhooks-scheduler")]
    webs = [h for h in SERVICE_HOSTS if site.systemd.is_active(site[h], "webhooks-web")]
    report.check(GUIDE, "after the rollback's restarts: one scheduler, web only on web hosts",
                 schedulers == [SCHEDULER_HOST] and webs == list(WEB_HOSTS),
                 f"scheduler on {schedulers}, web on {webs}")
    running = _running_releases(site)
    since = time.time()
    time.sleep(8)
    fresh = _events_between(site, since, time.time())
    report.check(GUIDE, f"0.1.0 runs on schema {NEW_SCHEMA}: events emitted after the rollback "
                 "arrive",
                 set(running.values()) == {OLD} and fresh and wait_received(site, fresh),
                 f"{len(fresh)} events, releases {sorted(set(running.values()))}")
    work1 = site[SCHEDULER_HOST]
    prefix = "sudo -u webhooks env $(grep -v '^#' /etc/webhooks/webhooks.env | xargs) "
    old_cli = site.follow.run(work1, prefix + "/opt/webhooks/venv/bin/webhooks accounts create "
                              "'Old CLI'", allow_exit=(0, 1, 2))
    report.check(GUIDE, "0.1.0's CLI refuses the newer schema", "newer than this version of "
                 "webhooks knows" in old_cli, old_cli.strip()[:160])
    new_cli = site.follow.run(work1, prefix + f"/opt/webhooks/releases/{NEW}/bin/webhooks "
                              "accounts create 'New CLI'")
    report.check(GUIDE, "0.2.0's CLI works meanwhile", "api_key" in new_cli, "")
    said = site.follow.run(work1, command_lines(schema)[0].replace('"0007"', f'"{OLD_SCHEMA}"'))
    old_cli = site.follow.run(work1, prefix + "/opt/webhooks/venv/bin/webhooks accounts create "
                              "'Old CLI'")
    report.check(GUIDE, f"the schema downgrade to {OLD_SCHEMA} prints nothing; 0.1.0's CLI works "
                 "again",
                 said.strip() == "" and "api_key" in old_cli, said.strip()[:160])
    said = site.follow.run(work1, prefix + f"/opt/webhooks/releases/{NEW}/bin/webhooks db upgrade")
    report.check(GUIDE, "0.2.0's db upgrade brings it forward again",
                 f"upgraded the schema from revision {OLD_SCHEMA} to {NEW_SCHEMA}" in said,
                 said.strip())
