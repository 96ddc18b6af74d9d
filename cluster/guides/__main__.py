"""``python -m cluster.guides [--keep-logs]``: docs/deploy.md, docs/integrate.md and
docs/upgrade.md followed on machines of network namespaces (cluster/guides/).

Prints each check as it is made (``guides: <guide>: ok|FAIL <what> (<detail>)``)
and, last, ``guides: checks passed: deploy.md N/N, integrate.md N/N,
upgrade.md N/N``; exits 0 only when every check passed. Needs root, and what
``make guides`` installs first (scripts/cluster-setup.sh --guides).
Everything is torn down at the end, also on Ctrl-C, SIGTERM or SIGHUP.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from . import deploy, integrate, upgrade
from .follow import Failed, Report
from .machines import clean_leftovers
from .site import OLD_COMMIT, Site

PREFIX = "whg"  # namespaces are named whg<pid>-<host>; make cluster's are whc<pid>-<host>


def follow_the_guides(site: Site, report: Report) -> None:
    site.log("guides: deploy.md, sections 1-5 on web1, web2, work1, work2, app (release 0.1.0)")
    account = deploy.install(site, report)
    site.log("guides: deploy.md, section 6 and the balancer")
    deploy.tls(site, report)
    account = deploy.deployment(site, report, account)
    site.log("guides: integrate.md on the app host")
    integrate.prepare(site)
    integrate.flask(site, report, account)
    integrate.script(site, report, account)
    integrate.broker_down(site, report, account)
    site.log("guides: upgrade.md, 0.1.0 -> 0.2.0 under load, then back")
    windows: list = []
    upgrade.start_emitter(site, account)
    time.sleep(5)
    upgrade.rolling(site, report, windows)
    upgrade.rollback(site, report, windows, account)
    upgrade.verdict(site, report, windows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cluster.guides")
    parser.add_argument("--keep-logs", action="store_true",
                        help="keep the run's folder (logs) even when every check passed")
    args = parser.parse_args(argv)
    started = time.monotonic()

    def log(line: str) -> None:
        print(time.strftime("%H:%M:%S "), line, sep="", flush=True)

    def interrupt(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, interrupt)
    clean_leftovers(PREFIX, log)
    # /var/tmp: the postgres user must reach the run folder (/tmp may be closed to it).
    run_dir = Path(tempfile.mkdtemp(prefix="webhooks-guides-", dir="/var/tmp"))
    site = Site(run_dir, f"{PREFIX}{os.getpid()}", log)
    report = Report(log)
    broke = None
    try:
        log(f"guides: run folder {run_dir}; 0.1.0 is {OLD_COMMIT[:7]} (schema 0014), "
            "0.2.0 this checkout")
        site.prepare()
        site.up()
        follow_the_guides(site, report)
    except KeyboardInterrupt:
        broke = "interrupted"
    except Failed as error:
        broke = f"a guide's line failed: {error}"
    except Exception:  # noqa: BLE001 - reported, then torn down like any other end
        broke = traceback.format_exc()
    finally:
        site.down()
    if broke:
        log(f"guides: stopped: {broke}")
    log(f"guides: took {time.monotonic() - started:.0f} s; everything torn down")
    passed = not broke and not report.failed()
    # rm -rf: the layers hold ten virtual environments, which shutil.rmtree takes minutes for.
    if passed and not args.keep_logs:
        subprocess.run(["rm", "-rf", str(run_dir)], check=False)
    else:
        subprocess.run(["rm", "-rf", str(run_dir / "machines")], check=False)
        log(f"guides: logs in {run_dir}/logs")
    log(report.summary())
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
