"""The cluster's ceiling (cluster/ceiling.py): the arithmetic from a delivery's cost on the
PostgreSQL primary to the deliveries/s a primary of N cores carries, and the WAL a replica
then replays; on figures made here, nothing timed."""

from __future__ import annotations

import pytest

from cluster.ceiling import ceiling, ceiling_table, from_figures, lines, replay_ceiling_per_s

FIGURES = {
    "deliveries": 3000, "window_s": 61.2, "attempts_per_delivery": 1.0,
    "pg_server_cpu_ms_per_delivery": 2.0, "pg_cpu_ms_per_delivery": 1.8,
    "pg_commits_per_delivery": 3.1, "wal_bytes_all_databases_per_delivery": 6000,
    "replica_received_bytes_per_delivery": 6000, "replica_replayed_bytes_per_delivery": 6000,
    "replica_replay_cpu_ms_per_delivery": 0.25, "replica_replayed_up_to_end": True,
}


def test_rate_is_the_cores_spent_over_the_cpu_per_delivery():
    # 4 cores at 75 % are 3,000 ms of CPU a second; at 2 ms each, 1,500 deliveries.
    row = ceiling(cores=4, utilisation=0.75, primary_cpu_ms=2.0, wal_bytes=6000)
    assert row.deliveries_per_s == pytest.approx(1500)
    # Every replica replays what the primary writes at that rate: 1,500 x 6,000 B.
    assert row.replica_wal_mb_per_s == pytest.approx(9.0)
    assert row.replica_replay_cores is None and not row.replay_bound


def test_replay_is_bound_by_its_one_process():
    # 0.25 ms of replay per delivery: one core replays 4,000 deliveries/s.
    assert replay_ceiling_per_s(0.25) == pytest.approx(4000)
    assert replay_ceiling_per_s(0.0) is None
    low, high = ceiling_table((8, 16), utilisation=1.0, primary_cpu_ms=2.0, wal_bytes=6000,
                              replay_cpu_ms=0.25)
    assert (low.deliveries_per_s, low.replica_replay_cores, low.replay_bound) == (4000, 1.0, False)
    assert (high.deliveries_per_s, high.replica_replay_cores, high.replay_bound) == (8000, 2.0, True)


def test_the_table_scales_with_cores():
    rows = ceiling_table(utilisation=0.5, primary_cpu_ms=1.0, wal_bytes=1000)
    assert [row.cores for row in rows] == [2, 4, 8, 16]
    assert [row.deliveries_per_s for row in rows] == [1000, 2000, 4000, 8000]
    assert [row.replica_wal_mb_per_s for row in rows] == [1, 2, 4, 8]


@pytest.mark.parametrize("utilisation, cpu", [(0, 1.0), (1.5, 1.0), (0.7, 0)])
def test_impossible_inputs_are_refused(utilisation, cpu):
    with pytest.raises(ValueError):
        ceiling(cores=2, utilisation=utilisation, primary_cpu_ms=cpu, wal_bytes=1)


def test_the_run_states_the_ceiling_from_its_own_figures():
    rows = from_figures(FIGURES, cores=(3, 2, 4), utilisation=0.7)
    # The whole server's CPU is the input (2.0 ms), not the backends' alone (1.8 ms).
    assert rows[0].deliveries_per_s == pytest.approx(3 * 0.7 * 1000 / 2.0)
    text = lines(FIGURES, rows, idle=None)
    assert "one primary of 3 cores at 70% carries 1,050 deliveries/s" in text[1]
    assert "a replica replays 6.3 MB/s of WAL" in text[1]
    assert text[2].startswith("cluster: ceiling by cores: 2: 700/s, 4.2 MB/s, 4: 1,400/s")
    assert "keeps up with 4,000 deliveries/s at most" in text[3]
    behind = lines({**FIGURES, "replica_replayed_up_to_end": False}, rows)
    assert "the replica had not caught up" in behind[0]
