"""What celeryconfig chooses, read in a fresh interpreter as every service process reads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def transport_for(broker_url: str, data_dir: Path) -> str:
    """celeryconfig's ``broker_transport`` for ``broker_url`` ("None" when it sets none)."""
    script = "import celeryconfig; print(getattr(celeryconfig, 'broker_transport', None))"
    env = {**os.environ, "WEBHOOKS_BROKER_URL": broker_url, "WEBHOOKS_DATA_DIR": str(data_dir)}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True, timeout=60)
    return out.stdout.strip()
