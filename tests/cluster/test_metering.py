"""The cluster's meter (cluster/metering.py): which processes of a server it adds up, and
where it finds the postmaster; on this test's own processes, nothing timed."""

from __future__ import annotations

import os
import subprocess
import sys

from cluster.metering import ProcessTreeCpu, postmaster_pid


def test_a_tree_is_its_root_and_descendants_or_those_titled_so():
    child = subprocess.Popen([sys.executable, "-c", "import sys; print(); sys.stdin.read()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    # Running its program: just after exec, the kernel may still show an empty title.
    child.stdout.readline()
    try:
        assert {os.getpid(), child.pid} <= set(ProcessTreeCpu(os.getpid()).pids())
        titled = ProcessTreeCpu(os.getpid(), (f"{sys.executable} -c import sys",)).pids()
        assert titled == [child.pid]
        assert ProcessTreeCpu(os.getpid(), ("postgres: startup",)).pids() == []
    finally:
        child.communicate(b"")


def test_the_postmaster_is_the_first_line_of_its_pid_file(tmp_path):
    (tmp_path / "postmaster.pid").write_text("4242\n/var/lib/postgresql/data\n1700000000\n")
    assert postmaster_pid(tmp_path) == 4242
