"""The profile scenario's attribution of a sampled stack to a part of the service."""

from benchmarks.profile_categories import categorise
from benchmarks.scenarios.profile import OUTSIDE_GIL, breakdown, read_stacks

CELERY = "trace_task (celery/app/trace.py:453)"
RUN = "run_attempt (webhooks/services/attempt.py:101)"


def test_the_leaf_most_known_frame_names_the_part():
    json_in_logs = [CELERY, RUN, "_log_attempt (webhooks/services/attempt.py:210)",
                    "format (webhooks/config/logs.py:60)",
                    "encode (json/encoder.py:200)"]
    assert categorise(json_in_logs) == "logging"
    claim = [CELERY, RUN, "execute (webhooks/storage/prepared.py:90)",
             "execute (sqlalchemy/engine/base.py:1400)"]
    assert categorise(claim) == "database (SQLAlchemy, psycopg2)"
    assert categorise([CELERY, RUN]) == "service logic (webhooks/)"
    ack = [CELERY, "send_command (redis/connection.py:500)", "sendall (socket.py:700)"]
    assert categorise(ack) == "broker (kombu, redis-py)"
    assert categorise([CELERY]) == "Celery (task machinery)"
    assert categorise(["<module> (<string>:1)"]) == "other"


def test_breakdown_counts_samples_as_cpu_and_the_rest_as_outside_the_gil(tmp_path):
    stacks = tmp_path / "stacks.txt"
    stacks.write_text(
        f"{CELERY};{RUN};post (requests/api.py:115) 30\n"
        f"{CELERY};{RUN} 10\n"
        f"{CELERY} 60\n")
    # 100 samples at 250/s over 10 deliveries: 0.4 ms each; 60 % of it in Celery.
    parts = breakdown(read_stacks(stacks), deliveries=10, cpu_ms_per_delivery=5.0)
    assert parts == {"Celery (task machinery)": 24.0, "HTTP (requests, urllib3, sockets)": 12.0,
                     "service logic (webhooks/)": 4.0, OUTSIDE_GIL: 0.0}
    assert breakdown(read_stacks(stacks), deliveries=100, cpu_ms_per_delivery=5.0)[OUTSIDE_GIL] == 1.0
