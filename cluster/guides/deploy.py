"""docs/deploy.md, followed on the site's machines, with release 0.1.0.

Sections 1 to 6 run as written on the hosts they name (section 5's enable
lines by their comment: web hosts, worker hosts, ONE host for the scheduler),
then the balancer of "Several web hosts", then section 6's checks from the
client machine through the balancer, and what the guide promises of a
deployment of several hosts: both web hosts answer and accept one dashboard
session, the client's address reaches them, /metrics wants its token, the
scheduler runs once, a delivery arrives, the replica serves the lists.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import time

from .follow import Failed, Report
from .site import PUBLIC_NAME, SERVICE_HOSTS, Site, address
from .text import block, blocks, comment_of, command_lines

GUIDE = "deploy.md"
WEB_HOSTS, WORKER_HOSTS, SCHEDULER_HOST = ("web1", "web2"), ("work1", "work2"), "work1"
ENV_FILE = "/etc/webhooks/webhooks.env"
PUBLIC = f"https://{PUBLIC_NAME}"


def environment(site: Site) -> dict[str, str]:
    """What the operator writes into webhooks.env with sudoedit: the lines of section 1's
    "A replica and Sentinels" as the guide writes them, and section 3's secrets. The
    example's database URL stays as it is (the run's PostgreSQL trusts its subnet, so the
    password is not checked)."""
    lines = block(GUIDE, "1. PostgreSQL", 1).splitlines()
    values = dict(line.split("=", 1) for line in lines if "=" in line)
    values.update({
        "WEBHOOKS_SECRET_KEY": site.secret_key,
        "WEBHOOKS_METRICS_TOKEN": site.metrics_token,
        # Not the guide's: the run's receiver has a private address, which the sender
        # refuses by default.
        "WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",
    })
    return values


def edit_env(site: Site, machine) -> None:
    """sudoedit /etc/webhooks/webhooks.env: each value set on its line, or added."""
    lines = machine.path(ENV_FILE).read_text().splitlines()
    for key, value in environment(site).items():
        found = [i for i, line in enumerate(lines) if re.match(rf"#?{key}=", line)]
        if found:
            lines[found[0]] = f"{key}={value}"
        else:
            lines.append(f"{key}={value}")
    machine.write(ENV_FILE, "\n".join(lines) + "\n", mode="0640")
    machine.sh(f"chgrp webhooks {ENV_FILE}")


def install(site: Site, report: Report, release: str = "0.1.0") -> dict:
    """Sections 1 to 5; returns the account section 4 created."""
    web1 = site["web1"]
    follow = site.follow
    # 1. PostgreSQL: the role and the database, from one host.
    follow.block(web1, block(GUIDE, "1. PostgreSQL"))
    site.start_replica()
    # 2. The code, on every host (the release's checkout in place of the path).
    body = block(GUIDE, "2. Install", **{"/path/to/webhooks-checkout": site.checkout(release)})
    for name in SERVICE_HOSTS:
        lines = follow.block(site[name], body)
        report.check(GUIDE, f"2. {name}: the release installed and linked",
                     "webhooks, version 0.1.0" in lines[-1][1], lines[-1][1].strip())
    # 3. Configuration, on every host; the deploy/ files are those of the guide's checkout.
    for name in SERVICE_HOSTS:
        follow.block(site[name], block(GUIDE, "3. Configuration"), cwd=site.checkout("0.2.0"),
                     skip=("sudoedit",))
        edit_env(site, site[name])
    # 4. The schema and the first account, on one host.
    work1 = site["work1"]
    migrate, account_line = (command_lines(b)[0] for b in blocks(GUIDE, "4. The schema", "sh"))
    said = follow.run(work1, migrate)
    report.check(GUIDE, "4. db upgrade on one host", "created the schema at revision" in said,
                 said.strip())
    account = json.loads(follow.run(work1, account_line))
    report.check(GUIDE, "4. accounts create", {"id", "api_key"} <= set(account), account["id"])
    # 5. The units: installed and verified on every host, each host enabling what it runs.
    units_body, enable_body = blocks(GUIDE, "5. systemd units", "sh")[:2]
    for name in SERVICE_HOSTS:
        follow.block(site[name], units_body, cwd=site.checkout("0.2.0"))
    report.check(GUIDE, "5. systemd-analyze verify of the four units", True, "exit 0 on every host")
    for line in command_lines(enable_body):
        role = comment_of(line)
        hosts = (WEB_HOSTS if role.startswith("web hosts") else WORKER_HOSTS
                 if role.startswith("worker hosts") else (SCHEDULER_HOST,))
        for name in hosts:
            follow.run(site[name], line.split(" #")[0])
    return account


def tls(site: Site, report: Report) -> None:
    """Section 6 on each web host, then the balancer of "Several web hosts"."""
    first, checks = blocks(GUIDE, "6. TLS", "sh")[:2]
    for name in WEB_HOSTS:
        site.follow.block(site[name], first, cwd=site.checkout("0.2.0"),
                          before={"install -m 0644 deploy/nginx": _put_certificate(site)})
    balancer, web_side = blocks(GUIDE, "Several web hosts", "sh")[:2]
    site.follow.block(site["lb"], balancer, cwd=site.checkout("0.2.0"))
    for name in WEB_HOSTS:
        site.follow.block(site[name], web_side.replace("10.0.0.5", address("lb")))
    _wait_for(site, f"curl -sS -o /dev/null -w '%{{http_code}}' {PUBLIC}/healthz", "200")
    said = site.follow.block(site["client"], checks)
    health, headers = said[0][1], said[1][1]
    report.check(GUIDE, "6. /healthz through the balancer over TLS",
                 json.loads(health) == {"status": "ok", "database": "ok", "broker": "ok"},
                 health.strip())
    report.check(GUIDE, "6. HSTS on the dashboard's sign-in page",
                 "strict-transport-security: max-age=31536000" in headers.lower(),
                 _first(headers, "strict"))
    cookie = _first(headers, "set-cookie")
    report.check(GUIDE, "6. the session cookie is Secure, HttpOnly, Path=/dashboard, SameSite=Lax",
                 all(p in cookie for p in ("webhooks_session=", "Secure", "HttpOnly",
                                            "Path=/dashboard", "SameSite=Lax")), cookie)


def _put_certificate(site: Site):
    def put(machine):
        machine.sh(f"install -m 0600 {site.tls}/fullchain.pem {site.tls}/privkey.pem "
                   "/etc/webhooks/tls/")
    return put


def _first(text: str, start: str) -> str:
    return next((line.strip() for line in text.splitlines()
                 if line.lower().startswith(start)), "")


def _wait_for(site: Site, script: str, expected: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        said = site["client"].sh(script, env=site.follow.env).stdout.strip()
        if said == expected:
            return
        if time.monotonic() > deadline:
            raise Failed(f"client$ {script}: {said!r}, not {expected!r} after {timeout:g} s")
        time.sleep(1)


def deployment(site: Site, report: Report, account: dict) -> dict:
    """What a deployment on several hosts promises; returns the account with its
    subscriptions (created through the balancer)."""
    client, env = site["client"], site.follow.env
    token = site.metrics_token
    metrics = client.sh(f"curl -sS -H 'Authorization: Bearer {token}' {PUBLIC}/metrics",
                        env=env).stdout
    bare = client.sh(f"curl -sS -o /dev/null -w '%{{http_code}}' {PUBLIC}/metrics", env=env).stdout
    report.check(GUIDE, "6. /metrics answers with the token, 401 without",
                 "webhooks_database_up 1.0" in metrics and bare == "401", f"without: {bare}")
    # Subscriptions through the balancer: one answering at once, one slowly (0.5-1.5 s).
    key = account["api_key"]
    subscriptions = []
    for path in ("/ok", "/slow"):
        answer = client.sh(
            f"curl -sS -X POST -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json'"
            f" -d '{{\"url\": \"http://recv.internal:8080{path}\"}}' {PUBLIC}/api/webhooks/subscriptions",
            env=env).stdout
        subscriptions.append(json.loads(answer)["id"])
    account = {**account, "subscriptions": subscriptions}
    sent = json.loads(client.sh(
        f"curl -sS -X POST -H 'Authorization: Bearer {key}' "
        f"{PUBLIC}/api/webhooks/subscriptions/{subscriptions[0]}/test", env=env).stdout)
    report.check(GUIDE, "a test event sent through the balancer reaches the receiver",
                 wait_received(site, {sent["event_id"]}), sent["event_id"])
    _sessions_across_hosts(site, report, key)
    _client_address(site, report)
    _replica_reads(site, report, key)
    _json_errors(site, report)
    _one_scheduler(site, report)
    return account


def wait_received(site: Site, events: set[str], timeout: float = 60) -> bool:
    """True once the receiver logged a 2xx for each of ``events``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = {json.loads(line)["event"] for line in site.received_log.read_text().splitlines()
                if line.strip()} if site.received_log.exists() else set()
        if events <= seen:
            return True
        time.sleep(0.5)
    return False


BROWSER = """
import re, sys, requests
key, base = sys.argv[1], sys.argv[2]
browser = requests.Session()
page = browser.get(base + "/dashboard/sign-in").text
token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page).group(1)
answer = browser.post(base + "/dashboard/sign-in", data={"csrf_token": token, "api_key": key,
                      "next": ""}, headers={"Referer": base + "/dashboard/sign-in"},
                      allow_redirects=False)
cookies = browser.cookies
statuses = []
for _ in range(6):  # a new connection each time: the balancer turns to the next host
    fresh = requests.Session(); fresh.cookies = cookies
    reply = fresh.get(base + "/dashboard/", allow_redirects=False)
    signed_in = "/dashboard/sign-out" in reply.text  # else the sign-in form, also 200
    statuses.append(f"{reply.status_code}{'' if signed_in else '-not-signed-in'}")
print(answer.status_code, *statuses)
"""


def _sessions_across_hosts(site: Site, report: Report, key: str) -> None:
    """One sign-in, then pages on new connections: both hosts must accept the session."""
    before = {name: _access_lines(site, name) for name in ("web1", "web2")}
    said = site["client"].sh(f"{sys.executable} -c {shlex.quote(BROWSER)} {key} {PUBLIC}",
                             env=site.follow.env).stdout.split()
    served = {name: _access_lines(site, name)[len(before[name]):] for name in ("web1", "web2")}
    pages = {name: sum("GET /dashboard/ " in line for line in lines) for name, lines in served.items()}
    report.check(GUIDE, "one dashboard session is accepted by both web hosts (the same "
                 "WEBHOOKS_SECRET_KEY)", said[:1] == ["302"] and set(said[1:]) == {"200"}
                 and all(pages.values()), f"sign-in {said[:1]}, pages {said[1:]}, served {pages}")


def _access_lines(site: Site, name: str) -> list[str]:
    path = site[name].path("/var/log/nginx/access.log")
    return path.read_text().splitlines() if path.exists() else []


def _client_address(site: Site, report: Report) -> None:
    last = _access_lines(site, "web1")[-1:] + _access_lines(site, "web2")[-1:]
    seen = {line.split()[0] for line in last}
    report.check(GUIDE, "the web hosts' nginx sees the client's address, not the balancer's "
                 "(PROXY protocol)", seen == {address("client")},
                 f"client {address('client')}, balancer {address('lb')}, logged {sorted(seen)}")


def _scans(site: Site, replica: bool) -> int:
    return int(site.psql("SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM "
                         "pg_stat_user_tables WHERE relname = 'deliveries'", replica=replica))


def _replica_reads(site: Site, report: Report, key: str) -> None:
    """The API's deliveries list read through the balancer: the replica's own statistics of
    the deliveries table count the reads (a standby keeps its own)."""
    before = _scans(site, replica=True)
    for _ in range(5):
        site["client"].sh(f"curl -sS -o /dev/null -H 'Authorization: Bearer {key}' "
                          f"{PUBLIC}/api/webhooks/deliveries", env=site.follow.env)
    deadline, after = time.monotonic() + 15, before
    while after - before < 5 and time.monotonic() < deadline:
        time.sleep(1)  # a standby's statistics are flushed about once a second
        after = _scans(site, replica=True)
    report.check(GUIDE, "WEBHOOKS_READ_DATABASE_URL: the replica serves the API's lists",
                 after - before >= 5, f"scans of deliveries on the replica {before} -> {after}")


def _json_errors(site: Site, report: Report) -> None:
    """gunicorn's own 414 for a request line over its limit, through both proxies."""
    long = "x" * 5000
    said = site["client"].sh(f"curl -sS -w ' %{{http_code}}' '{PUBLIC}/api/webhooks/deliveries?"
                             f"cursor={long}'", env=site.follow.env).stdout.strip()
    body, _, status = said.rpartition(" ")
    report.check(GUIDE, "a request line too long for gunicorn answers JSON through the proxy "
                 "(the web unit's JsonErrorWorker)", status == "414" and body.startswith("{"),
                 f"{status} {body[:60]}")


def _one_scheduler(site: Site, report: Report) -> None:
    running = [name for name in SERVICE_HOSTS
               if site.systemd.is_active(site[name], "webhooks-scheduler")]
    report.check(GUIDE, "exactly one scheduler in the deployment", running == [SCHEDULER_HOST],
                 f"running on {running}")
