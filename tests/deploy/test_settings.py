"""Every setting from the environment: ``check --deploy`` is clean with the guide's sample environment, the
guide lists every variable the settings read, and the new deployment variables parse (or refuse) as documented."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.processes import ROOT

SAMPLE = ROOT / "docs" / "deploy.env.example"
GUIDE = ROOT / "docs" / "deploy.md"
# Read by the code but set by the product itself (the guide says so in one sentence, not in a table).
INTERNAL = {"KB_PROCESS_ROLE", "KB_VALKEY_OWNER", "OMP_WAIT_POLICY", "HF_HUB_OFFLINE", "TOKENIZERS_PARALLELISM"}
_READS = re.compile(
    r"""(?:env_[a-z]+|os\.environ\.get|os\.environ\.setdefault|getenv)\(\s*["']([A-Z][A-Z0-9_]+)["']"""
    r"""|os\.environ\[["']([A-Z][A-Z0-9_]+)["']\]"""
)


def sample_values() -> dict[str, str]:
    """docs/deploy.env.example's NAME=value lines."""
    values = {}
    for line in SAMPLE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name] = value
    return values


def sample_env(tmp_path: Path) -> dict[str, str]:
    """The sample as a process environment: its values, with a real key and local folders."""
    values = sample_values()
    (tmp_path / "metrics").mkdir(parents=True, exist_ok=True)
    values.update(
        SECRET_KEY=secrets.token_urlsafe(64),
        KB_HOME=str(tmp_path / "kb"),
        STATIC_ROOT=str(tmp_path / "static"),
        MEDIA_ROOT=str(tmp_path / "media"),
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
    )
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **values}


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )


def test_check_deploy_is_clean_with_the_sample_environment(tmp_path: Path) -> None:
    # given the sample environment alone (nothing inherited from the test session)
    env = sample_env(tmp_path)

    # when
    clean = manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    as_shipped = manage("check", env={**env, "SECRET_KEY": sample_values()["SECRET_KEY"]})
    no_hosts = manage("check", env={k: v for k, v in env.items() if k != "ALLOWED_HOSTS"})

    # then clean; and the sample's placeholder key, or a missing ALLOWED_HOSTS, stops the process
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "System check identified no issues" in clean.stdout
    assert as_shipped.returncode != 0 and "SECRET_KEY" in as_shipped.stderr
    assert no_hosts.returncode != 0 and "Set ALLOWED_HOSTS" in no_hosts.stderr


def _code_reads() -> set[str]:
    names: set[str] = set()
    sources = [ROOT / "manage.py", *(ROOT / "config").rglob("*.py")]
    for app in ("search", "accounts", "presets", "analytics", "browse", "graphql_api", "mcp_api", "adapters"):
        sources += [p for p in (ROOT / app).rglob("*.py") if "migrations" not in p.parts]
    for path in sources:
        if path.name == "test.py" and path.parent.name == "settings":
            continue  # the test settings
        for match in _READS.finditer(path.read_text()):
            names.add(match.group(1) or match.group(2))
    return names


def _documented() -> set[str]:
    names: set[str] = set()
    for line in GUIDE.read_text().splitlines():
        if line.startswith("| `"):
            names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split("|")[1]))
    return names


def test_the_guide_lists_every_variable_the_code_reads_and_no_other() -> None:
    read, documented = _code_reads(), _documented()

    assert read - INTERNAL - documented == set(), "read from the environment but not in docs/deploy.md"
    assert documented - read == set(), "in docs/deploy.md but read nowhere"
    assert set(sample_values()) <= documented, "the sample environment sets a variable the guide does not list"
    assert INTERNAL <= read and all(re.search(f"`{name}[`=]", GUIDE.read_text()) for name in INTERNAL)


SHOW = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'proxy': s.SECURE_PROXY_SSL_HEADER, 'fwd_host': s.USE_X_FORWARDED_HOST, "
    "'broker': s.CELERY_BROKER_URL, 'queue': s.CELERY_TASK_DEFAULT_QUEUE, "
    "'transport': s.CELERY_BROKER_TRANSPORT_OPTIONS, 'beat': [s.CELERY_BEAT_SCHEDULER, s.BEAT_LEADER_KEY, "
    "s.BEAT_LEADER_TTL_S], 'static': str(s.STATIC_ROOT), 'media': str(s.MEDIA_ROOT), "
    "'cookies': [s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE], 'hsts': [s.SECURE_HSTS_INCLUDE_SUBDOMAINS, "
    "s.SECURE_HSTS_PRELOAD]}))"
)


def _show(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**sample_env(tmp_path), **extra}
    return subprocess.run([sys.executable, "-c", SHOW], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=180)


def test_deployment_variables_parse_as_documented(tmp_path: Path) -> None:
    defaults = _show(tmp_path)
    assert defaults.returncode == 0, defaults.stderr[-2000:]
    shown = json.loads(defaults.stdout.strip().splitlines()[-1])
    assert shown["proxy"] == ["HTTP_X_FORWARDED_PROTO", "https"] and shown["fwd_host"] is False
    assert shown["broker"] == "redis://valkey.internal:6379/0" and shown["queue"] == "celery"
    assert shown["transport"]["visibility_timeout"] == 3600 and shown["transport"]["unacked_restore_interval"] == 10
    assert shown["beat"] == ["config.beat:LeaderScheduler", "kb:beat:leader", 30.0]
    assert shown["static"] == str(tmp_path / "static") and shown["media"] == str(tmp_path / "media")
    assert shown["cookies"] == [True, True] and shown["hsts"] == [True, True]

    changed = _show(
        tmp_path,
        SECURE_PROXY_SSL_HEADER="X-Forwarded-Scheme: https",
        USE_X_FORWARDED_HOST="yes",
        CELERY_BROKER_URL="rediss://broker.internal:6380/1",
        CELERY_TASK_DEFAULT_QUEUE="kb-staging",
        CELERY_VISIBILITY_TIMEOUT_S="20",
        BEAT_LEADER_TTL_S="12",
        SESSION_COOKIE_SECURE="off",
        SECURE_HSTS_PRELOAD="no",
    )
    assert changed.returncode == 0, changed.stderr[-2000:]
    shown = json.loads(changed.stdout.strip().splitlines()[-1])
    assert shown["proxy"] == ["HTTP_X_FORWARDED_SCHEME", "https"] and shown["fwd_host"] is True
    assert shown["broker"] == "rediss://broker.internal:6380/1" and shown["queue"] == "kb-staging"
    assert shown["transport"]["visibility_timeout"] == 20 and shown["transport"]["unacked_restore_interval"] == 4
    assert shown["beat"][2] == 12.0 and shown["cookies"] == [False, True] and shown["hsts"] == [True, False]
    off = _show(tmp_path, SECURE_PROXY_SSL_HEADER="off")
    assert json.loads(off.stdout.strip().splitlines()[-1])["proxy"] is None


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("SECURE_PROXY_SSL_HEADER", "https", "is not 'Header-Name: value'"),
        ("CELERY_BROKER_URL", "amqp://guest@rabbit//", "is not a Redis URL"),
        ("BEAT_LEADER_TTL_S", "0.1", "BEAT_LEADER_TTL_S=0.1 is out of range"),
        ("CELERY_VISIBILITY_TIMEOUT_S", "soon", "is not a whole number"),
    ],
)
def test_bad_deployment_values_stop_the_process_with_the_fix(
    tmp_path: Path, name: str, value: str, message: str
) -> None:
    done = _show(tmp_path, **{name: value})
    assert done.returncode != 0 and message in done.stderr, done.stderr[-2000:]
