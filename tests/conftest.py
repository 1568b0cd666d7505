"""Suite-wide guards: no real model requests, no actor may outlive its test, fixed examples."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from typing import NoReturn

import pykka
import pytest
import structlog
from hypothesis import settings

# Property tests draw the same examples in every run (a failure is found again by running the
# suite again, not by luck), and keep no example database between runs.
settings.register_profile("actors", derandomize=True, database=None)
settings.load_profile("actors")

# Network-backed models refuse to run anywhere in the suite (tests that need one switch it on
# against a loopback server explicitly).
os.environ.setdefault("ACTORS_ALLOW_MODEL_REQUESTS", "0")


@pytest.fixture(autouse=True)
def _no_actor_outlives_its_test() -> Iterator[None]:
    before = set(pykka.ActorRegistry.get_all())
    yield
    leaked = [ref for ref in pykka.ActorRegistry.get_all() if ref not in before]
    if leaked:
        for ref in leaked:  # stop them so one leak does not hang the whole run
            ref.stop(block=False)
        pytest.fail(
            f"{len(leaked)} actor(s) outlived the test: "
            f"{[ref.actor_class.__name__ for ref in leaked][:5]}; use `with Runtime() as rt:`"
        )


@pytest.fixture(autouse=True)
def _library_logging_back_to_quiet() -> Iterator[None]:
    # structlog.testing.capture_logs() leaves structlog "configured" (with its default console
    # renderer) after it returns; the library would then print the lines of every later test.
    configured = structlog.is_configured()
    yield
    if not configured:
        structlog.reset_defaults()


# -- PostgreSQL ---------------------------------------------------------------------------------

POSTGRES_DSN_VAR = "ACTORS_TEST_POSTGRES_DSN"


def _no_postgres(reason: str) -> NoReturn:
    """Skip, or fail under CI (CI=true), where the server must be there."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI must start one (.ci/services/postgres.sh)", pytrace=False)
    pytest.skip(
        f"{reason}: the PostgreSQL tests need a server; 'bash .ci/services/postgres.sh start DIR' "
        f"starts one and 'source DIR/postgres.env' sets {POSTGRES_DSN_VAR}"
    )


@pytest.fixture(scope="module")
def postgres_dsn(request: pytest.FixtureRequest) -> Iterator[str]:
    """The connection string of a new, empty database, dropped after the test module.

    Skips the module when no server is configured or reachable (fails instead under CI).
    """
    admin_dsn = os.environ.get(POSTGRES_DSN_VAR, "").strip()
    if not admin_dsn:
        _no_postgres(f"{POSTGRES_DSN_VAR} is not set")
    try:
        import psycopg
        import psycopg.conninfo
    except ImportError:
        _no_postgres("psycopg is not installed (pip install -e '.[dev]')")
    try:
        admin = psycopg.connect(admin_dsn, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        _no_postgres(f"no PostgreSQL server answers at {POSTGRES_DSN_VAR} ({type(exc).__name__})")
    stem = "".join(c if c.isalnum() else "_" for c in request.module.__name__.split(".")[-1])
    name = f"actors_{stem}_{secrets.token_hex(4)}"[:63]
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]  # built name
        try:
            yield psycopg.conninfo.make_conninfo(admin_dsn, dbname=name)
        finally:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')  # type: ignore[arg-type]
