"""With nothing configured, a Postgres store prints nothing when its server drops it.

psycopg_pool warns through standard-library logging ("discarding broken connection"), which
Python prints to stderr when no handler is configured. The store's lines, and these, appear
only where the application asked: its own logging, or `actors.configure_logging`.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

APP = textwrap.dedent(
    """
    import logging, sys
    import psycopg
    import actors
    from actors.exceptions import StoreError
    from actors.store import PostgresStore

    mode, dsn = sys.argv[1], sys.argv[2]
    if mode == "app":
        logging.basicConfig(format="APP %(name)s: %(message)s")
    elif mode == "actors":
        actors.configure_logging("WARNING")
    store = PostgresStore(dsn, pool_size=2, connect_timeout=5)
    store.list_sessions()
    with psycopg.connect(dsn, autocommit=True) as admin:  # the server drops the store's links
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    failures = 0
    for _ in range(3):
        try:
            store.list_sessions()
        except StoreError:
            failures += 1
    store.close()
    print(f"failures={failures}")
    """
)


def run_app(tmp_path: Path, mode: str, dsn: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "app.py"
    script.write_text(APP)
    done = subprocess.run(
        [sys.executable, str(script), mode, dsn],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "failures=1"  # the broken link failed one call, then a new one
    return done


def test_nothing_configured_prints_nothing(postgres_dsn: str, tmp_path: Path) -> None:
    assert run_app(tmp_path, "quiet", postgres_dsn).stderr == ""


@pytest.mark.parametrize(
    ("mode", "line"),
    [
        ("app", "APP psycopg.pool: discarding "),
        ("actors", "discarding "),
    ],
)
def test_the_pools_warnings_reach_logging_the_application_asked_for(
    postgres_dsn: str, tmp_path: Path, mode: str, line: str
) -> None:
    err = run_app(tmp_path, mode, postgres_dsn).stderr
    assert line in err
    if mode == "actors":
        assert "[warning  ] discarding" in err  # in the library's own format
        assert "[psycopg.pool]" in err
