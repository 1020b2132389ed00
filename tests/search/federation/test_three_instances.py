"""Federation on three real instances of this product on this machine: `manage.py up` three times, each with its
own KB_HOME (its own embedded PostgreSQL and Valkey), its own port and database; keys issued and peers linked
with the commands an operator would type.

hq asks emea and apac. emea issued hq a key that reads its public items only; apac issued one that reads
everything, but hq shows apac only to its group "bids" (and to staff). Checked: results of all three merged, a
page two peers hold shown once with both; staff-only items reaching only whom the key scope and the link's
groups allow; a key never federating further; `federatedSearch` over one instance equal to `search`; a hostile
peer's markup kept as text; a peer hanging (its processes suspended) and a peer stopped reported without
stalling the search.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.config.test_up import free_port, leftovers, wait_for
from tests.support import fake_peer

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow

SHARED = {"id": "shared-safety", "title": "Solar safety rules",
          "body": "Switch off the solar array and lock the isolator before any work on the roof.",
          "visibility": "public"}
ITEMS = {
    "hq": [
        {"id": "hq-1", "title": "Solar panel maintenance checklist",
         "body": "Clean the solar panels every spring and check the inverter display.", "visibility": "public"},
        {"id": "hq-2", "title": "Solar budget board notes", "body": "The solar budget for next year.",
         "visibility": "staff"},
    ],
    "emea": [
        {"id": "emea-1", "title": "Solar inverter replacement in Europe",
         "body": "How to replace a failed solar inverter under the European warranty.", "visibility": "public"},
        {"id": "emea-2", "title": "Solar supplier dispute memo", "body": "Confidential: the solar supplier dispute.",
         "visibility": "staff"},
        SHARED,
    ],
    "apac": [
        {"id": "apac-1", "title": "Solar feed-in tariffs in Asia",
         "body": "Feed-in tariffs for rooftop solar across the region.", "visibility": "public"},
        {"id": "apac-2", "title": "Solar tender shortlist", "body": "Staff only: the solar tender shortlist.",
         "visibility": "staff"},
        SHARED,
    ],
}


@dataclass
class Instance:
    name: str
    home: Path
    port: int
    proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in {"DATABASE_URL", "REDIS_URL", "KB_HOME", "KB_EPHEMERAL", "DJANGO_SETTINGS_MODULE"}}
        env.update(KB_HOME=str(self.home), PORT=str(self.port), EMBEDDING_PROVIDER="hash", WEB_WORKERS="1",
                   SITE_URL=self.url, FEDERATION_INSTANCE_NAME=self.name)
        return env

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "manage.py", "up", "--no-worker", "--no-demo"], cwd=ROOT,
                                     env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)

    def manage(self, *args: str) -> str:
        """A management command on this instance (it joins the running instance's database)."""
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env(), capture_output=True,
                              text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, f"{self.name}: manage.py {' '.join(args)}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            for proc in [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(recursive=True)]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.resume()  # a test that failed while it hung
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def post(url: str, body: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        data: dict[str, Any] = json.load(response)
        return data


def search_everywhere(hq: Instance) -> dict[str, Any]:
    """hq's operator (staff) searches every knowledge base: ``kb_search --sources all``."""
    out = hq.manage("kb_search", "solar", "--sources", "all", "--threshold", "0", "--limit", "50", "--json")
    data: dict[str, Any] = json.loads(out)
    return data


@pytest.fixture(scope="module")
def instances(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Instance]]:
    running = {name: Instance(name, tmp_path_factory.mktemp(f"kb-{name}"), free_port()) for name in ITEMS}
    try:
        for instance in running.values():
            instance.start()
        for instance in running.values():
            assert instance.proc is not None
            wait_for(instance.url + "/readyz", instance.proc)
        for name, instance in running.items():
            items = instance.home / "items.jsonl"
            items.write_text("".join(json.dumps(item) + "\n" for item in ITEMS[name]), encoding="utf-8")
            instance.manage("import_content", str(items), "--publish")
        hq, emea, apac = running["hq"], running["emea"], running["apac"]
        # emea lets hq read its public items; apac lets hq read everything, and hq shows apac to "bids" only
        emea_key = emea.manage("api_key", "create", "hq federation").strip().splitlines()[-1]
        apac_key = apac.manage("api_key", "create", "hq federation", "--all-content").strip().splitlines()[-1]
        hq.manage("shell", "-c", "from django.contrib.auth.models import Group; Group.objects.create(name='bids')")
        hq.manage("federation_peer", "add", "emea", emea.url, "--api-key", emea_key, "--public",
                  "--timeout-ms", "3000")
        hq.manage("federation_peer", "add", "apac", apac.url, "--api-key", apac_key, "--groups", "bids",
                  "--timeout-ms", "3000")
        yield running
    finally:
        for instance in running.values():
            instance.stop()
        for instance in running.values():
            assert leftovers(instance.home, instance.port) == []


def test_three_instances_merge_and_each_keeps_its_own_access_rules(instances: dict[str, Instance]) -> None:
    hq = instances["hq"]
    # `check` says each peer answers, and with which version
    checked = hq.manage("federation_peer", "check")
    assert "emea: ok" in checked and "apac: ok" in checked
    # hq's operator: all three merged; the page emea and apac both hold appears once, with both
    data = search_everywhere(hq)
    assert {s["name"]: s["status"] for s in data["sources"]} == {"local": "ok", "emea": "ok", "apac": "ok"}
    titles = {r["title"]: r for r in data["results"]}
    assert {"Solar panel maintenance checklist", "Solar budget board notes", "Solar inverter replacement in Europe",
            "Solar feed-in tariffs in Asia", "Solar tender shortlist"} <= set(titles)
    assert [r["title"] for r in data["results"]].count("Solar safety rules") == 1
    assert sorted(titles["Solar safety rules"]["sources"]) == ["apac", "emea"]
    assert titles["Solar inverter replacement in Europe"]["url"].startswith(instances["emea"].url + "/items/")
    # emea's key reads emea's public items only: its staff memo never reaches hq, not even hq's staff
    assert "Solar supplier dispute memo" not in titles
    # an anonymous visitor of hq: hq's public items and the public peer's; apac (group "bids") is not asked
    anonymous = post(hq.url + "/api/search", {"query": "solar", "sources": "all", "threshold": 0, "limit": 50})
    assert [s["name"] for s in anonymous["sources"]] == ["local", "emea"]
    seen = {r["title"] for r in anonymous["results"]}
    assert "Solar inverter replacement in Europe" in seen and "Solar panel maintenance checklist" in seen
    assert not seen & {"Solar budget board notes", "Solar supplier dispute memo", "Solar tender shortlist",
                       "Solar feed-in tariffs in Asia"}
    # a key hq issued searches hq only, even with every scope: a key never federates further
    key = hq.manage("api_key", "create", "an agent", "--all-content").strip().splitlines()[-1]
    answer = post(hq.url + "/api/federation/search", {"query": "solar", "threshold": 0}, key=key)
    assert answer["instance"] == "hq"
    assert {h["title"] for h in answer["hits"]} == {"Solar panel maintenance checklist", "Solar budget board notes"}
    # with how its engine fused them (the asking side merges every source's hits on the pooled lanes)
    assert answer["fusion"]["lanes"] and all(h["lane_scores"] and h["rerank"] >= 1 for h in answer["hits"])


def test_federated_search_over_one_instance_equals_search(instances: dict[str, Instance]) -> None:
    hq = instances["hq"]
    fields = "highlightedTitle highlightedContent confidence lanes"
    plain = post(hq.url + "/graphql", {"query": "{ search(input: {query: \"solar inverter\", threshold: 0}) "
                                                f"{{ totalCount hits {{ {fields} }} }} }}"})["data"]["search"]
    federated = post(hq.url + "/graphql", {
        "query": "{ federatedSearch(input: {query: \"solar inverter\", sources: [\"local\"], threshold: 0}) "
                 f"{{ totalCount sources {{ name status }} hits {{ {fields} }} }} }}"})["data"]["federatedSearch"]
    assert plain["hits"] and federated["hits"] == plain["hits"]
    assert federated["totalCount"] == plain["totalCount"]
    assert federated["sources"] == [{"name": "local", "status": "OK"}]  # a GraphQL enum


def test_a_hostile_peer_is_shown_as_text_on_a_real_instance(instances: dict[str, Instance]) -> None:
    hq = instances["hq"]
    with fake_peer.serving() as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        hq.manage("federation_peer", "add", "hostile", f"{base}/ok", "--api-key", "kb_00000001_" + "k" * 43,
                  "--public", "--timeout-ms", "2000")
        hq.manage("federation_peer", "add", "garbage", f"{base}/garbage", "--api-key", "kb_00000002_" + "k" * 43,
                  "--public", "--timeout-ms", "2000")
        try:
            with urllib.request.urlopen(hq.url + "/browse?q=solar&sources=all", timeout=30) as response:
                page = response.read().decode()
            assert response.status == 200
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page
            assert 'data-source="hostile" data-status="ok"' in page
            assert 'data-source="garbage" data-status="error"' in page
        finally:
            hq.manage("federation_peer", "remove", "hostile")
            hq.manage("federation_peer", "remove", "garbage")


def test_a_hanging_peer_then_a_stopped_one_never_stall_the_search(instances: dict[str, Instance]) -> None:
    hq, apac = instances["hq"], instances["apac"]
    assert apac.proc is not None
    # apac hangs: `up` and every process it started (the web server) stopped, its socket still accepting
    stopped_procs = [psutil.Process(apac.proc.pid), *psutil.Process(apac.proc.pid).children(recursive=True)]
    for proc in stopped_procs:
        proc.suspend()
    try:
        started = time.monotonic()
        hanging = search_everywhere(hq)
        elapsed = time.monotonic() - started
    finally:
        for proc in stopped_procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.resume()
    status = {s["name"]: s["status"] for s in hanging["sources"]}
    assert status == {"local": "ok", "emea": "ok", "apac": "timeout"}
    assert "Solar inverter replacement in Europe" in {r["title"] for r in hanging["results"]}
    assert elapsed < 60  # the command's own start-up included; the peer costs its 3 s timeout
    # apac stopped: refused connections are an error, reported; the others answer
    apac.stop()
    stopped = search_everywhere(hq)
    assert {s["name"]: s["status"] for s in stopped["sources"]} == {"local": "ok", "emea": "ok", "apac": "error"}
    assert "Solar safety rules" in {r["title"] for r in stopped["results"]}  # emea still holds it
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(apac.url + "/readyz", timeout=5)
