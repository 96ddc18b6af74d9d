"""What `make guides` (cluster/guides/) reads from the guides, checked without namespaces:
the blocks it runs are where it looks, and the guides keep what the cluster run found."""

from __future__ import annotations

import shlex
import subprocess

from cluster.guides import text, upgrade
from cluster.guides.units import environment_file
from cluster.services import ROOT, procfile


def test_a_comment_inside_a_block_does_not_end_the_section():
    # The Flask example's code has `# The same database…` lines: not headings.
    assert "db.session.commit()" in text.block("integrate.md", "Flask", language="python")
    assert len(text.blocks("integrate.md", "Flask", language="sh")) == 1


def test_the_blocks_the_run_follows_are_there():
    assert len(text.blocks("deploy.md", "1. PostgreSQL")) >= 2
    assert len(text.blocks("deploy.md", "6. TLS", "sh")) >= 2
    assert len(text.blocks("deploy.md", "Several web hosts", "sh")) == 2
    assert len(text.blocks("upgrade.md", "A rolling upgrade", "sh")) == 4
    assert len(text.blocks("upgrade.md", "Rolling back", "sh")) == 2
    assert len(text.blocks("integrate.md", "A script or a cron job", "sh")) == 2


def test_a_line_of_a_block_with_continuations_is_one_command():
    lines = text.command_lines("a \\\n  b\n# only a comment\n\nc  # why\n")
    assert lines == ["a    b", "c  # why"]
    assert text.comment_of(lines[1]) == "why"


def test_the_sentinel_broker_url_means_the_same_to_systemd_and_to_a_shell(tmp_path):
    env = text.block("deploy.md", "1. PostgreSQL", 1)
    path = tmp_path / "webhooks.env"
    path.write_text(env)
    by_systemd = environment_file(env)["WEBHOOKS_BROKER_URL"]
    by_shell = subprocess.run(["bash", "-c", f"set -a; . {path}; set +a; "
                               'printf %s "$WEBHOOKS_BROKER_URL"'], capture_output=True,
                              text=True, check=True).stdout
    assert by_systemd == by_shell and by_shell.count("sentinel://") == 3


def test_every_restart_line_names_the_hosts_it_is_for():
    # Run on every host, `systemctl restart webhooks-scheduler` starts a scheduler on each.
    for heading in ("A rolling upgrade", "Rolling back"):
        for line in text.command_lines(text.blocks("upgrade.md", heading, "sh")[0 if heading
                                                                               == "Rolling back" else 2]):
            if "systemctl restart" in line:
                hosts = [h for h in ("web1", "web2", "work1", "work2") if upgrade.runs_on(line, h)]
                assert hosts != ["web1", "web2", "work1", "work2"], line
                if "scheduler" in line:
                    assert hosts == ["work1"], line


def _gunicorn_options(command: str) -> list[str]:
    """The gunicorn options of ``command``, without the address it binds or the app."""
    words = shlex.split(command)
    words = words[next(i for i, word in enumerate(words) if word.endswith("gunicorn")) + 1:]
    bind = words.index("--bind")
    return [word for i, word in enumerate(words)
            if i not in (bind, bind + 1) and "create_app" not in word]


def test_the_web_unit_runs_gunicorn_with_the_procfile_s_options():
    """The worker class (JSON error answers), the access log, no control socket (issue 36)."""
    unit = (ROOT / "deploy" / "systemd" / "webhooks-web.service").read_text()
    exec_start = next(line.split("=", 1)[1] for line in unit.splitlines()
                      if line.startswith("ExecStart="))
    assert "--no-control-socket" in _gunicorn_options(procfile()["web"])
    assert _gunicorn_options(exec_start) == _gunicorn_options(procfile()["web"])
