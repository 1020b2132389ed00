import pytest
from django.core.exceptions import ImproperlyConfigured

from config import env


def test_database_url_with_socket_host():
    parsed = env.parse_database_url("postgresql://postgres:@/kb?host=/tmp/pg")
    assert parsed["NAME"] == "kb" and parsed["HOST"] == "/tmp/pg" and parsed["USER"] == "postgres"


def test_database_url_with_password_and_port():
    parsed = env.parse_database_url("postgres://u:p%40ss@db.example:5433/kb?sslmode=require")
    assert (parsed["HOST"], parsed["PORT"], parsed["PASSWORD"]) == ("db.example", "5433", "p@ss")
    assert parsed["OPTIONS"] == {"sslmode": "require"}


@pytest.mark.parametrize("url, hint", [("mysql://x/y", "postgres://"), ("postgres://host", "database name")])
def test_bad_database_url_says_how_to_fix(url, hint):
    with pytest.raises(ImproperlyConfigured, match=hint):
        env.parse_database_url(url)


def test_bad_values_raise_with_the_fix(monkeypatch):
    monkeypatch.setenv("X_INT", "ten")
    with pytest.raises(ImproperlyConfigured, match="whole number"):
        env.env_int("X_INT", 10)
    monkeypatch.setenv("X_INT", "0")
    with pytest.raises(ImproperlyConfigured, match="out of range"):
        env.env_int("X_INT", 10, minimum=1, maximum=5)
    monkeypatch.setenv("X_BOOL", "maybe")
    with pytest.raises(ImproperlyConfigured, match="boolean"):
        env.env_bool("X_BOOL")
    monkeypatch.setenv("X_CHOICE", "gpu")
    with pytest.raises(ImproperlyConfigured, match="local, openai, hash"):
        env.env_choice("X_CHOICE", "local", ("local", "openai", "hash"))


def test_replica_urls_become_aliases_connected_like_the_primary():
    # given: a web process's primary (pooled, statement timeout) and two replica URLs
    primary = {
        "ENGINE": "config.postgres_db", "CONN_MAX_AGE": 0,
        "OPTIONS": {"options": "-c statement_timeout=15000", "pool": {"min_size": 2, "max_size": 20}},
    }
    urls = ["postgres://ro@replica-a:5432/kb", "postgres://ro@replica-b/kb?connect_timeout=5"]
    # when
    replicas = env.database_replicas(urls, primary)
    # then: replica_1, replica_2, in order, each with the primary's pool and timeout, never a test database
    assert list(replicas) == ["replica_1", "replica_2"]
    first, second = replicas["replica_1"], replicas["replica_2"]
    assert (first["HOST"], first["NAME"], first["ENGINE"]) == ("replica-a", "kb", "config.postgres_db")
    assert first["OPTIONS"]["options"] == "-c statement_timeout=15000"
    assert first["OPTIONS"]["pool"] == {"min_size": 2, "max_size": 20}
    assert first["OPTIONS"]["connect_timeout"] == "2" and second["OPTIONS"]["connect_timeout"] == "5"
    assert first["TEST"] == {"MIRROR": "default"} and first["CONN_HEALTH_CHECKS"] is True
    assert env.database_replicas([], primary) == {}


@pytest.mark.parametrize(
    "urls, hint",
    [(["mysql://x/y"], "DATABASE_REPLICA_URLS must start with postgres://"),
     (["postgres://host"], "DATABASE_REPLICA_URLS has no database name"),
     (["postgres://a/kb", "postgres://a/kb"], "twice")],
)
def test_bad_replica_urls_say_how_to_fix(urls, hint):
    with pytest.raises(ImproperlyConfigured, match=hint):
        env.database_replicas(urls, {"ENGINE": "django.db.backends.postgresql", "OPTIONS": {}})


def test_settings_read_database_replica_urls():
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.DATABASE_REPLICAS, s.DATABASES['replica_2']['HOST'], s.DATABASE_ROUTERS, s.REPLICA_MAX_LAG_S, "
        "s.REPLICA_PROBE_S, s.READ_YOUR_WRITES_S)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
        env={**os.environ, "DATABASE_REPLICA_URLS": "postgres://ro@a/kb, postgres://ro@b/kb", "REPLICA_MAX_LAG_S": "2"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == (
        "('replica_1', 'replica_2') b ['config.db_router.ReplicaRouter'] 2.0 2.0 10.0"
    )
