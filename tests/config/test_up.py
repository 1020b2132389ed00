"""`manage.py up` end to end: embedded servers, demo data once, web + worker + beat, clean Ctrl-C."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_up(home: Path, port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "KB_HOME", "KB_EPHEMERAL", "DJANGO_SETTINGS_MODULE"}}
    env.update(KB_HOME=str(home), PORT=str(port), EMBEDDING_PROVIDER="hash", WEB_WORKERS="1")
    return subprocess.Popen([sys.executable, "manage.py", "up"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def wait_for(url: str, proc: subprocess.Popen, timeout: float = 240) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"up exited early:\n{proc.stdout.read()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.status
        except OSError:
            time.sleep(1)
    raise AssertionError(f"{url} did not answer within {timeout} s")


def search_lanes(url: str) -> set[str]:
    """The lanes that found the hits of a demo search, anonymous, no threshold."""
    body = json.dumps({"query": "tender submission", "threshold": 0}).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return {lane for hit in json.load(response)["results"] for lane in hit["lanes"]}


def wait_for_vector_lane(url: str, proc: subprocess.Popen, timeout: float = 120) -> set[str]:
    """Search until the vector lane finds hits (the worker embedded the demo); the lanes of that search."""
    deadline = time.monotonic() + timeout
    lanes: set[str] = set()
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"up exited early:\n{proc.stdout.read()}")
        try:
            lanes = search_lanes(url)
        except urllib.error.HTTPError as exc:  # 429: searches are rate limited (30 a minute)
            assert exc.code == 429, exc
            time.sleep(float(exc.headers.get("Retry-After") or 5))
            continue
        if "vector" in lanes:
            return lanes
        time.sleep(2.5)
    raise AssertionError(f"the worker never embedded the demo: searches found only {lanes}")


def leftovers(home: Path, port: int) -> list[str]:
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if str(home) in cmd or f"--port {port}" in cmd or ("celery" in cmd and str(home) in cmd):
            found.append(f"{proc.info['pid']}: {cmd[:120]}")
    return found


def stop(proc: subprocess.Popen) -> str:
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    out, _ = proc.communicate(timeout=60)
    return out


def test_up_serves_seeds_once_and_ctrl_c_leaves_no_process(tmp_path):
    home = tmp_path / "kb"
    port = free_port()
    # given: a first start
    proc = start_up(home, port)
    try:
        assert wait_for(f"http://127.0.0.1:{port}/browse", proc) == 200
        assert wait_for(f"http://127.0.0.1:{port}/admin/login/", proc) == 200
        # the web server answered once the words were indexed; the worker embeds the demo behind it
        lanes = wait_for_vector_lane(f"http://127.0.0.1:{port}/api/search", proc)
        assert "vector" in lanes and "lexical" in lanes
        time.sleep(2)  # let the worker and beat finish booting
        children = [p.info["cmdline"] for p in psutil.process_iter(["cmdline"])
                    if p.info["cmdline"] and "celery" in " ".join(p.info["cmdline"])]
        assert children, "worker and beat are running"
    finally:
        first_output = stop(proc)
    # then: everything is gone, and the first start seeded the demo and printed the credentials
    assert proc.returncode == 0, first_output
    assert "Created admin user" in first_output and "Loading the demo knowledge base" in first_output
    assert "Searchable by words now; the worker embeds" in first_output
    assert "/graphql" in first_output and "/mcp" in first_output
    time.sleep(1)
    assert leftovers(home, port) == []
    # when: a second start on the same data
    proc = start_up(home, port)
    try:
        assert wait_for(f"http://127.0.0.1:{port}/browse", proc) == 200
    finally:
        second_output = stop(proc)
    # then: no second seeding, and again nothing left behind
    assert "Loading the demo knowledge base" not in second_output
    assert "Created admin user" not in second_output
    time.sleep(1)
    assert leftovers(home, port) == []
