"""Many hosts (docs/deploy.md): two web processes and two workers on one database and one Valkey, under a mixed
load, while one web process and one worker are killed (SIGKILL, as a lost host).

The layout is the guide's, on loopback addresses: web A on 127.0.0.2 and web B on 127.0.0.3 (uvicorn with the
real settings, ``config.settings.base``), workers W1 and W2 (``celery worker``, prefork, acks late), the test
session's PostgreSQL (the primary; plus ``replica_urls``, given to every process as ``DATABASE_REPLICA_URLS``)
and its Valkey (cache and broker). The test plays the load balancer and the clients:

- **searches** (``POST /api/search`` and ``GET /search``, each with a query text of its own) alternate between
  the hosts; every search writes its query-log row on the web process that served it;
- **content saves** through the admin (``POST /admin/search/contentitem/add/``, each with an external id of
  its own), which commit and enqueue a debounced index build for the workers;
- **tasks** (``kbtest.record``, tests/deploy/celery_app.py) enqueued straight to the broker, each recording
  its start and its end in a table.

Like a proxy, the client sends a request to the other host when a connection is refused or cut, and skips a
host for a moment after it refused (passive health check). Searches are reads and saves carry an external id
(a second save of the same id is refused as a duplicate, writing nothing), so sending one again is safe.

W1 is killed while it runs a task, then web A while it handles a save. Then, once the load has stopped and
the workers are idle: no request was lost (every one answered, by one host or the other); the only attempts
that failed were those in flight on web A when it died (cut) and those sent to it afterwards (refused); no
task was lost (W1's was delivered again to W2 after the visibility timeout); and the final state is the one
the same load yields without failures (computed from what the load sent, not from a second run): every save
stored once and found by a search on the surviving host, every task recorded, the index clean, and every
answered search in the query log (twice at most for those web A had logged before dying).
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.cookiejar import CookieJar, DefaultCookiePolicy
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import User
from django.db import connection

from analytics.models import QueryLog
from search.models import ContentItem, IndexState
from tests.deploy.conftest import Processes
from tests.deploy.processes import Web, database_url_for, product_env, wait_until
from tests.factories import build, make_item
from tests.reliability.figures import record

LOAD_S = 16.0  # the mixed load runs this long; the kills come about 7 s in
KILL_AFTER_S = 7.0
VISIBILITY_TIMEOUT_S = 10  # a dead worker's message goes to the other worker this long after its delivery
TASK_SLEEP_S = 0.25
SKIP_DEAD_HOST_S = 2.0  # the "proxy" skips a host this long after it refused a connection
PASSWORD = "many-hosts-password"


@dataclass
class Attempt:
    host: str
    started: float
    ended: float
    outcome: str  # "ok", "refused" (never reached the process), "cut" (sent, no answer), "http <status>"


@dataclass
class Request:
    kind: str  # "api_search", "search_page", "save"
    key: str  # the query text, or the saved item's external id
    attempts: list[Attempt] = field(default_factory=list)
    answered: bool = False
    duplicate: bool = False  # a save sent again after a cut, refused because the first one had committed


class _FormFields(HTMLParser):
    """The fields a browser would submit from the admin's add form, with their default values."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: list[tuple[str, str]] = []
        self._select: tuple[str, bool] | None = None  # (name, multiple)
        self._first_option: str | None = None
        self._chosen = False
        self._textarea: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        name = a.get("name")
        if tag == "input" and name and a.get("type", "text") not in ("submit", "button", "file", "image"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            self.fields.append((name, a.get("value", "on" if a.get("type") == "checkbox" else "")))
        elif tag == "select" and name:
            self._select, self._first_option, self._chosen = (name, "multiple" in a), None, False
        elif tag == "option" and self._select is not None:
            if "selected" in a:
                self.fields.append((self._select[0], a.get("value", "")))
                self._chosen = True
            elif self._first_option is None:
                self._first_option = a.get("value", "")
        elif tag == "textarea" and name:
            self._textarea, self._text = name, ""

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "select" and self._select is not None:
            name, multiple = self._select
            if not multiple and not self._chosen and self._first_option is not None:
                self.fields.append((name, self._first_option))  # a single select submits its first option
            self._select = None
        elif tag == "textarea" and self._textarea is not None:
            self.fields.append((self._textarea, self._text.strip("\n")))
            self._textarea = None


class Balancer:
    """The load balancer (and the clients behind it): round robin, retry elsewhere when a connection fails."""

    def __init__(self, webs: list[Web]) -> None:
        self.hosts = [w.base_url for w in webs]
        self.skip_until = dict.fromkeys(self.hosts, 0.0)
        self.in_flight = dict.fromkeys(self.hosts, 0)
        self.saves_in_flight = dict.fromkeys(self.hosts, 0)
        self.lock = threading.Lock()
        self.requests: list[Request] = []
        self.turn = 0
        # Clients on distinct loopback source addresses: each has its own rate-limit budget (REMOTE_ADDR).
        # No keep-alive, so a request after a host died is refused, not sent into a dead connection; no
        # cookie jar, so the only cookies sent are those a request names (the admin's session).
        limits = httpx.Limits(max_keepalive_connections=0)
        self.clients = [
            httpx.Client(
                timeout=30,
                follow_redirects=False,
                cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
                transport=httpx.HTTPTransport(local_address=f"127.0.1.{1 + i}", limits=limits),
            )
            for i in range(64)
        ]

    def close(self) -> None:
        for client in self.clients:
            client.close()

    def _order(self) -> list[str]:
        with self.lock:
            self.turn += 1
            first = self.turn % len(self.hosts)
            order = self.hosts[first:] + self.hosts[:first]
            now = time.monotonic()
            return sorted(order, key=lambda h: self.skip_until[h] > now)  # skipped hosts last

    def send(
        self, kind: str, key: str, call: Callable[[httpx.Client, str], httpx.Response], *, n: int
    ) -> tuple[Request, httpx.Response | None]:
        request = Request(kind, key)
        client = self.clients[n % len(self.clients)]
        response = None
        for host in self._order():
            with self.lock:
                self.in_flight[host] += 1
                self.saves_in_flight[host] += kind == "save"
            started = time.monotonic()
            try:
                response = call(client, host)
                outcome = "ok" if response.status_code < 400 else f"http {response.status_code}"
            except httpx.ConnectError:
                outcome = "refused"
            except httpx.TransportError:
                outcome = "cut"
            finally:
                with self.lock:
                    self.in_flight[host] -= 1
                    self.saves_in_flight[host] -= kind == "save"
            request.attempts.append(Attempt(host, started, time.monotonic(), outcome))
            if outcome == "refused":
                with self.lock:
                    self.skip_until[host] = time.monotonic() + SKIP_DEAD_HOST_S
            if outcome not in ("refused", "cut"):
                request.answered = outcome == "ok"
                break
        with self.lock:
            self.requests.append(request)
        return request, response


def _results(response: httpx.Response) -> list[dict]:
    """The hits of an answered search; anything else fails with what the server said."""
    assert response.status_code == 200, (response.status_code, response.text[:2000])
    return response.json()["results"]


def _admin_user() -> User:
    """A superuser whose password hash the web processes can check (the test settings hash with MD5)."""
    hasher = PBKDF2PasswordHasher()
    return User.objects.create(
        username="deployer", is_staff=True, is_superuser=True,
        password=hasher.encode(PASSWORD, hasher.salt(), iterations=1000),
    )


def _admin_login(base_url: str) -> dict[str, str]:
    """Sign in on one host; returns the cookies (the session is in the database: valid on every host)."""
    with httpx.Client(base_url=base_url, timeout=30) as client:
        page = client.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token, page.text[:2000]
        done = client.post(
            "/admin/login/",
            data={"csrfmiddlewaretoken": token.group(1), "username": "deployer", "password": PASSWORD,
                  "next": "/admin/"},
        )
        assert done.status_code == 302, done.text[:2000]
        return {"csrftoken": client.cookies["csrftoken"], "sessionid": client.cookies["sessionid"]}


def _add_form(base_url: str, cookies: dict[str, str]) -> list[tuple[str, str]]:
    page = httpx.get(base_url + "/admin/search/contentitem/add/", timeout=30, headers=_cookie_header(cookies))
    assert page.status_code == 200, page.text[:2000]
    form = page.text[page.text.index('id="contentitem_form"'):]
    parser = _FormFields()
    parser.feed(form[: form.index("</form>")])
    replaced = {"title", "body", "summary", "publish_now", "external_id", "slug", "csrfmiddlewaretoken"}
    return [(k, v) for k, v in parser.fields if k not in replaced]


def _cookie_header(cookies: dict[str, str]) -> dict[str, str]:
    return {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_web_processes_and_workers_die_under_load_and_nothing_is_lost(
    processes: Processes, replica_urls: list[str], tmp_path: Path
) -> None:
    # given: a small corpus, an admin, and the table the test task records into
    for i in range(6):
        make_item(title=f"Tender pricing guide {i}", body=f"How to price a tender, part {i}: costs and margins.")
    build()
    _admin_user()
    table = f"kbtest_runs_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {table} (id integer PRIMARY KEY, starts integer NOT NULL, runs integer NOT NULL, "
            "started_by text NOT NULL, started_at timestamptz NOT NULL, finished_by text)"
        )
    queue = f"kbtest-hosts-{uuid.uuid4().hex[:8]}"
    env = product_env(
        database_url=database_url_for(connection.settings_dict["NAME"]),
        redis_url=settings.REDIS_URL,
        home=tmp_path / "kb",
        replica_urls=replica_urls,
        ALLOWED_HOSTS="127.0.0.2,127.0.0.3",
        CELERY_TASK_DEFAULT_QUEUE=queue,
        CELERY_VISIBILITY_TIMEOUT_S=str(VISIBILITY_TIMEOUT_S),
        SEARCH_AUTO_BUILD="1",
        QUERY_LOG_ANONYMOUS_TEXT="1",
    )
    from config.celery import app

    balancer: Balancer | None = None
    try:
        # and the deployment: two web processes on their own addresses, two workers
        web_a, web_b = processes.web("web-a", "127.0.0.2", env), processes.web("web-b", "127.0.0.3", env)
        w1, w2 = processes.worker("w1", env), processes.worker("w2", env)
        for proc in (web_a, web_b, w1, w2):
            proc.wait_ready()
        balancer = Balancer([web_a, web_b])
        cookies = _admin_login(web_a.base_url)
        form = _add_form(web_b.base_url, cookies)  # the session works on the other host too
        enqueued: list[int] = []
        empty: list[str] = []  # searches answered without the corpus's hits
        stop = threading.Event()
        errors: list[BaseException] = []

        def searcher(offset: int) -> None:
            n = offset
            while not stop.is_set():
                n += 3
                text = f"tender pricing q{n}"
                if n % 2:
                    # (threshold 0 / nearest=1: "q{n}" makes each text its own, and a word nothing holds
                    # would leave a close match out; this test is about requests, not confidence)
                    _, response = balancer.send("api_search", text, lambda c, h, t=text: c.post(
                        h + "/api/search", json={"query": t, "threshold": 0}), n=n)
                    found = response is not None and response.status_code == 200 and bool(_results(response))
                else:
                    _, response = balancer.send("search_page", text, lambda c, h, t=text: c.get(
                        h + "/search", params={"q": t, "nearest": "1"}), n=n)
                    found = response is not None and "/items/tender-pricing-guide-" in response.text
                if not found:
                    empty.append(text)

        def saver() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                external_id = f"many-hosts-{n}"
                data: dict[str, list[str]] = {}
                for key, value in [*form, ("csrfmiddlewaretoken", cookies["csrftoken"]),
                                   ("external_id", external_id), ("title", f"Zephyr{n} delivery note"),
                                   ("body", f"zephyrword{n} shipping schedule."), ("publish_now", "on"),
                                   ("_save", "Save")]:
                    data.setdefault(key, []).append(value)
                request, response = balancer.send(
                    "save", external_id,
                    lambda c, h, d=data: c.post(
                        h + "/admin/search/contentitem/add/", data=d, headers=_cookie_header(cookies)),
                    n=n,
                )
                if response is not None:
                    # saved: back to the list; the form again: after a cut, a save that had committed is
                    # refused as a duplicate; anything else (a redirect to the login page) is a failure
                    request.duplicate = response.status_code == 200 and "already exists" in response.text
                    request.answered = request.duplicate or (
                        response.status_code == 302
                        and response.headers["location"].endswith("/admin/search/contentitem/")
                    )
                time.sleep(0.3)

        def enqueuer() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                app.send_task("kbtest.record", args=[n, table, TASK_SLEEP_S], queue=queue)
                enqueued.append(n)
                time.sleep(0.2)

        def guarded(target: Callable[..., None], *args: Any) -> Callable[[], None]:
            def run() -> None:
                try:
                    target(*args)
                except BaseException as exc:  # surfaced by the main thread
                    errors.append(exc)
                    stop.set()

            return run

        threads = [threading.Thread(target=guarded(searcher, i), daemon=True) for i in range(3)]
        threads += [threading.Thread(target=guarded(saver), daemon=True),
                    threading.Thread(target=guarded(enqueuer), daemon=True)]
        load_started = time.monotonic()
        for thread in threads:
            thread.start()

        # when: about halfway, W1 is killed while it runs a task, then web A while it serves a request
        time.sleep(KILL_AFTER_S)

        def w1_mid_task(*, just_started: bool = False) -> list[int]:
            fresh = " AND clock_timestamp() - started_at < interval '80 milliseconds'" if just_started else ""
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT id FROM {table} WHERE started_by = %s AND runs < starts{fresh}", [w1.nodename]
                )
                return [row[0] for row in cursor.fetchall()]

        def load_running() -> bool:
            if errors:
                raise errors[0]
            return True

        # (a task that started less than 80 ms ago has at least 170 ms of its sleep left: time enough)
        wait_until(lambda: load_running() and bool(w1_mid_task(just_started=True)), timeout=10,
                   what="W1 running a task", interval=0.01)
        w1.kill()
        killed_mid_task = w1_mid_task()
        def kill_web_a_mid_request() -> float:
            # while it handles a save (and whatever searches it has at that moment), under the balancer's
            # lock: no request to web A can be counted as finished meanwhile
            with balancer.lock:
                if balancer.saves_in_flight[web_a.base_url] == 0:
                    return 0.0
                killed = time.monotonic()
                os.killpg(web_a.pid, signal.SIGKILL)
                return killed

        web_killed_at = 0.0

        def killed_mid_request() -> bool:
            nonlocal web_killed_at
            web_killed_at = kill_web_a_mid_request() if load_running() else 0.0
            return web_killed_at > 0

        wait_until(killed_mid_request, timeout=15, what="a save on web A", interval=0.002)
        web_a.kill()  # (reaped)
        web_dead_at = time.monotonic()  # the process gone, its sockets closed
        time.sleep(max(0.0, LOAD_S - (time.monotonic() - load_started)))
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        assert not errors, errors

        # and the system settles: every task finished, the index built
        def all_recorded() -> bool:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT count(*) FROM {table} WHERE runs > 0")
                return cursor.fetchone()[0] == len(enqueued)

        drained_in = wait_until(all_recorded, timeout=VISIBILITY_TIMEOUT_S + 60, what="every task", interval=0.5)
        wait_until(lambda: not IndexState.objects.get(pk=1).dirty, timeout=90, what="the index build", interval=0.5)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT id, starts, runs, started_by, finished_by FROM {table}")
            runs = {row[0]: row[1:] for row in cursor.fetchall()}
        alive = {p.name for p in processes.started if p.alive()}
    finally:
        if balancer is not None:
            balancer.close()
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {table}")
    requests = balancer.requests
    a, b = web_a.base_url, web_b.base_url

    # then: no request lost; every failed attempt was on web A: in flight at its death (cut), or after (refused)
    searches = [r for r in requests if r.kind != "save"]
    saves = [r for r in requests if r.kind == "save"]
    lost = [r for r in requests if not r.answered]
    assert not lost, [(r.kind, r.key, r.attempts) for r in lost[:5]]
    attempts = [at for r in requests for at in r.attempts]
    cut = [at for at in attempts if at.outcome == "cut"]
    refused = [at for at in attempts if at.outcome == "refused"]
    assert not [at for at in attempts if at.outcome.startswith("http")], "an HTTP error answered"
    assert not empty, empty[:5]  # and every search found the corpus
    # in flight at the kill: sent to web A before it was gone, not answered before the SIGKILL
    in_flight = [at for at in attempts if at.host == a and at.started <= web_dead_at and at.ended >= web_killed_at]
    assert in_flight and all(at.host == a and at in in_flight for at in cut), cut
    saves_in_flight = [r for r in saves if any(at in in_flight for at in r.attempts)]
    assert saves_in_flight  # the kill came while web A was handling a save
    assert all(at.host == a and at.started >= web_killed_at for at in refused), refused
    assert all(at.host == b for at in attempts if at.started > web_dead_at and at.outcome == "ok")
    assert any(at.host == a and at.outcome == "ok" for at in attempts)  # both hosts served before the kill

    # no task lost: each one recorded; W1's task was started again, and finished, by W2
    assert set(runs) == set(enqueued)
    assert all(runs[i][1] >= 1 for i in enqueued)
    assert killed_mid_task and all(runs[i][0] >= 2 and runs[i][3] == w2.nodename for i in killed_mid_task)

    # the final state is the one the same load yields without failures
    saved_ids = [r.key for r in saves]
    items = dict(ContentItem.objects.filter(external_id__in=saved_ids).values_list("external_id", "pk"))
    assert sorted(items) == sorted(saved_ids)  # each save stored exactly once (external ids are unique)
    titles = set(ContentItem.objects.filter(pk__in=items.values()).values_list("live_revision__title", flat=True))
    assert titles == {f"Zephyr{k.rsplit('-', 1)[1]} delivery note" for k in saved_ids}
    # found on the surviving host (with replicas: once caught up); the full ranking (threshold 0), as the load's
    # searches: this is about what was stored, and each poll costs the address's rate-limit budget
    for i, external_id in enumerate(saved_ids):
        word = f"zephyrword{external_id.rsplit('-', 1)[1]}"
        with httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address=f"127.0.2.{1 + i}")) as c:
            wait_until(
                lambda w=word, c=c, pk=items[external_id]: pk in [
                    hit["id"] for hit in _results(c.post(b + "/api/search", json={"query": w, "threshold": 0}))
                ],
                timeout=20, what=f"{external_id} searchable", interval=0.5,
            )
    logged = dict.fromkeys((r.key for r in searches), 0)
    for text in QueryLog.objects.filter(query_text__in=list(logged)).values_list("query_text", flat=True):
        logged[text] += 1
    assert all(count >= 1 for count in logged.values())  # every answered search was logged once ...
    extra_rows = sum(count - 1 for count in logged.values())
    assert extra_rows <= len([at for r in searches for at in r.attempts if at.outcome == "cut"])  # ... or twice
    # (when web A had logged it before dying)
    # and the processes: the killed ones dead, the others still serving, then every one stopped (no orphans)
    assert alive == {"web-b", "w2"}, alive
    processes.stop_all()
    leftovers = []
    for proc in processes.started:
        try:
            os.killpg(proc.pid, 0)
            leftovers.append(proc.name)
        except ProcessLookupError:
            pass
    assert not leftovers, leftovers

    redelivered = [i for i in runs if runs[i][0] >= 2]
    figures = {
        "web_processes": 2,
        "workers": 2,
        "replicas": len(replica_urls),
        "requests_sent": len(requests),
        "searches": len(searches),
        "saves": len(saves),
        "requests_lost": len(lost),
        "in_flight_on_killed_web_at_kill": len(in_flight),
        "attempts_cut_at_kill_then_retried": len(cut),
        "attempts_refused_after_kill_then_retried": len(refused),
        "saves_in_flight_at_kill": len(saves_in_flight),
        "saves_cut_and_already_committed": len([r for r in saves if r.duplicate]),
        "tasks_enqueued": len(enqueued),
        "tasks_recorded": len([i for i in runs if runs[i][1] >= 1]),
        "tasks_killed_mid_run": len(killed_mid_task),
        "tasks_delivered_twice": len(redelivered),
        "tasks_drained_after_load_s": round(drained_in, 1),
        "query_log_rows_extra": extra_rows,
        "visibility_timeout_s": VISIBILITY_TIMEOUT_S,
    }
    record("deploy.many_hosts", figures)
    print("many hosts:", figures)  # noqa: T201 - the counts, in the test's output (pytest -s)
