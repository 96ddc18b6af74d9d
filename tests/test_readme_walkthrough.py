"""The README's walkthrough, run as written.

Its first ``sh`` block (terminal 1, ``make run``) is started in the
background; once the service says it is ready, all the other ``sh`` blocks
of the section run, in order, in one bash (terminal 2), from the project
folder. Nothing in them is substituted except a variable the README itself
defines (``RECEIVER_PORT``: a free port here). The environment names a free
``PORT`` (which the README reads as ``${PORT:-5000}``) and a data folder in
a temporary directory, so the run leaves the checkout alone.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.support.devprocess import ROOT, Processes, clean_env, free_port, group_alive, wait_until

# Starts `webhooks dev`: real worker, web and scheduler processes (the integration tier).
pytestmark = pytest.mark.integration

README = ROOT / "README.md"


def walkthrough_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Walkthrough\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```sh\n(.*?)^```$", section, re.S | re.M)


def _objects(output: str) -> list[dict]:
    """Every line of the output that is a JSON object."""
    found = []
    for line in output.splitlines():
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except ValueError:
                pass
    return found


def test_the_walkthrough_has_a_service_block_then_the_commands():
    blocks = walkthrough_blocks()
    assert len(blocks) >= 6
    assert "make run" in blocks[0] and all("make run" not in b for b in blocks[1:])
    commands = "\n".join(blocks[1:])
    for needed in ("webhooks accounts create", "webhooks listen", "webhooks emit",
                   "/resume", "/replay", "--status 500"):
        assert needed in commands
    assert re.search(r"^export RECEIVER_PORT=\d+$", commands, re.M)


@pytest.fixture
def procs(tmp_path_factory):
    processes = Processes(tmp_path_factory.mktemp("logs"))
    yield processes
    processes.kill_all()


def test_the_walkthrough_runs_as_written(tmp_path, procs):
    blocks = walkthrough_blocks()
    port = free_port()
    env = clean_env(PORT=str(port), WEBHOOKS_DATA_DIR=str(tmp_path / "webhooks-data"))

    # Terminal 1: the service, exactly as the README starts it.
    service = procs.start(["bash", "-c", blocks[0]], cwd=ROOT, env=env, name="make-run")
    service.wait_for(rf"ready: http://127\.0\.0\.1:{port}\b", 240)
    service.wait_for(r"celery@\S+ ready\.", 60)
    assert "WEBHOOKS_ALLOW_PRIVATE_TARGETS=true" in service.output()

    # Terminal 2: every other block, in order, in one shell; a failing command fails the run.
    script = "\n".join(blocks[1:])
    script = re.sub(r"^export RECEIVER_PORT=\d+$", f"export RECEIVER_PORT={free_port()}",
                    script, flags=re.M)
    terminal = procs.start(["bash", "-e", "-o", "pipefail", "-c", script], cwd=ROOT, env=env,
                           name="terminal-2")
    try:
        code = terminal.process.wait(240)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"the walkthrough did not finish in 240 s:\n{terminal.tail(80)}"
        ) from None
    terminal._reader.join(5)
    output = terminal.output()
    assert code == 0, f"the walkthrough failed (exit {code}):\n{output[-6000:]}"

    objects = _objects(output)
    account = next(o for o in objects if set(o) == {"id", "api_key"})
    assert account["api_key"].startswith("whk_")
    deliveries = [o for o in objects if "attempt_count" in o]
    subscriptions = [o for o in objects if "consecutive_failures" in o]

    # 3. The first event arrives, verified, on attempt 1.
    first = deliveries[0]
    assert first["status"] == "done" and first["attempt_count"] == 1
    assert re.search(rf"event={first['event_id']}\s+delivery={first['id']}\s+attempt=1\s+"
                     r"verified\s+-> 200$", output, re.M)
    # 4. Three failed attempts 5 s apart pause the subscription; the delivery waits, paused.
    assert any(s["status"] == "paused" and s["consecutive_failures"] == 3 for s in subscriptions)
    held = next(d for d in deliveries if d["status"] == "paused")
    assert held["attempt_count"] == 3
    assert [a["status_code"] for a in held["attempts"]] == [500, 500, 500]
    assert len(re.findall(rf"delivery={held['id']}\s+attempt=\d\s+verified\s+-> 500$",
                          output, re.M)) == 3
    # 5. Resume sends it: attempt 4 arrives, verified.
    resumed = next(d for d in deliveries if d["id"] == held["id"] and d["status"] == "done")
    assert resumed["attempts"][-1]["outcome"] == "success" and resumed["attempt_count"] == 4
    assert re.search(rf"delivery={held['id']}\s+attempt=4\s+verified\s+-> 200$", output, re.M)
    # 6. The wrong secret: 401, failed for good; the replay is a new delivery, done.
    failed = next(d for d in deliveries if d["status"] == "failed")
    assert [a["status_code"] for a in failed["attempts"]] == [401]
    assert re.search(rf"delivery={failed['id']}\s+attempt=1\s+NOT verified: signature does not "
                     r"match the body and secret\s+-> 401$", output, re.M)
    replay = deliveries[-1]
    assert replay["replay_of"] == failed["id"] and replay["status"] == "done"
    assert replay["event_id"] == failed["event_id"] and replay["id"] != failed["id"]
    assert re.search(rf"delivery={replay['id']}\s+attempt=1\s+verified\s+-> 200$", output, re.M)

    # Ctrl-C in terminal 1 stops all three processes.
    children = service.children()
    assert set(children) == {"web", "worker", "scheduler"}
    service.interrupt(timeout=90)
    for name, pgid in children.items():
        wait_until(lambda: not group_alive(pgid), 10, f"{name} to stop after Ctrl-C")
