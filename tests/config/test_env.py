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
