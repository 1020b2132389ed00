"""Start everything in one foreground command: servers, migrations, demo data, web, worker, beat.

Ctrl-C or SIGTERM stops every child (and their children) and then the embedded servers, so no
postgres, valkey or celery process is left behind.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from config import env, runtime
from search.management.commands._progress import progress_bar

STOP_GRACE_S = 10


class Command(BaseCommand):
    help = "Start the product: embedded servers (unless URLs are set), migrate, demo data, web, worker, beat."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--no-worker", action="store_true", help="do not start the Celery worker and beat")
        parser.add_argument("--no-demo", action="store_true", help="do not load the demo knowledge base")

    def handle(self, *args: Any, **opts: Any) -> None:
        home = env.kb_home()
        port = env.env_int("PORT", 8000, minimum=1, maximum=65535)
        child_env = os.environ.copy()
        if not env.env_str("DATABASE_URL"):
            child_env["DATABASE_URL"] = runtime.ensure_postgres(home)
        child_env["REDIS_URL"] = settings.REDIS_URL
        children: list[subprocess.Popen[bytes]] = []
        stopping = False

        def stop(*_: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            call_command("migrate", interactive=False, verbosity=0)
            call_command("collectstatic", interactive=False, verbosity=0)
            # e5 for ONNX Runtime, converted once (about 20 s) before the web and worker processes need it
            from search.embeddings.providers import embeddings_prepare

            embeddings_prepare()
            embed_in_worker = self._first_start(opts)
            if stopping:
                return
            # The web workers share their Prometheus metrics through files, so /metrics counts all of them.
            from analytics.metrics import multiprocess_dir_prepare

            web_env = {**child_env, "PROMETHEUS_MULTIPROC_DIR": multiprocess_dir_prepare(home)}
            children.append(self._spawn(runtime.web_command(
                host=env.env_str("HOST", "127.0.0.1"),
                port=port,
                workers=env.env_int("WEB_WORKERS", 2, minimum=1, maximum=64),
                keep_alive_s=env.env_int("WEB_KEEP_ALIVE_S", runtime.KEEP_ALIVE_S, minimum=1, maximum=3600),
            ), web_env))
            if not opts["no_worker"]:
                children.append(self._spawn(
                    [sys.executable, "-m", "celery", "-A", "config", "worker", "--loglevel", "warning",
                     "--concurrency", "1", "--hostname", f"kb-worker-{os.getpid()}@%h"], child_env))
                children.append(self._spawn(
                    [sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "warning",
                     "--schedule", str(home / "celerybeat-schedule")], child_env))
                if embed_in_worker:
                    from search.tasks import embeddings_backfill_task

                    embeddings_backfill_task.apply_async()
            base = f"http://{env.env_str('HOST', '127.0.0.1')}:{port}"
            self.stdout.write(self.style.SUCCESS("Knowledge base is up:"))
            for label, path in (("browse", "/browse"), ("graphql", "/graphql"), ("mcp", "/mcp"), ("admin", "/admin/")):
                self.stdout.write(f"  {label:8} {base}{path}")
            self.stdout.write("Press Ctrl-C to stop.")
            self.stdout.flush()
            while not stopping:
                for child in children:
                    if child.poll() is not None:
                        name = " ".join(str(arg) for arg in list(child.args)[2:4])  # type: ignore[arg-type]
                        self.stderr.write(f"{name} exited with {child.returncode}; stopping.")
                        stopping = True
                time.sleep(0.3)
        finally:
            self._stop(children)
            from django.db import connections

            connections.close_all()
            runtime.stop_valkey(home)
            runtime.stop_postgres()
            self.stdout.write("Stopped.")

    def _spawn(self, argv: list[str], child_env: dict[str, str]) -> subprocess.Popen[bytes]:
        # Own session: Ctrl-C reaches only this process, which then stops each child's whole group in order.
        return subprocess.Popen(argv, env=child_env, start_new_session=True, cwd=settings.BASE_DIR)

    def _stop(self, children: list[subprocess.Popen[bytes]]) -> None:
        for child in children:
            if child.poll() is None:
                try:
                    os.killpg(child.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + STOP_GRACE_S
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(child.pid, signal.SIGKILL)  # the group may still hold grandchildren
            except (ProcessLookupError, PermissionError):
                pass

    def _first_start(self, opts: dict[str, Any]) -> bool:
        """Admin user, demo, and the build of what is not searchable yet. Returns whether chunks still lack a
        vector for the worker to embed: with a worker, the web server starts once the words are indexed (a few
        seconds) and the worker embeds behind it, so the knowledge base answers by words at once and by
        meaning as soon as the worker is through (the demo: about 20 s); without one, everything is built here.
        """
        from django.contrib.auth import get_user_model

        from search.services import demo, indexing
        from search.services.spaces import active_space
        from search.services.vector_index import embeddings_pending

        User = get_user_model()
        if not User.objects.filter(is_superuser=True).exists():
            password = env.env_str("ADMIN_PASSWORD") or secrets.token_urlsafe(12)
            User.objects.create_superuser("admin", "admin@example.com", password)
            self.stdout.write(self.style.WARNING(f"Created admin user: admin / {password}  (shown once)"))
        # The demo goes into an empty knowledge base only, once; skipping it for content of its own says so.
        decision = None if opts["no_demo"] else demo.demo_load_decision()
        if decision and decision.message:
            self.stdout.write(decision.message)
        if decision and decision.load:
            from django.utils import timezone

            from search.services.governance import review_flags_update
            from search.services.quality import quality_scores_update

            self.stdout.write("Loading the demo knowledge base (it is empty)…")
            result = demo.demo_load()
            self.stdout.write(f"  {result}")
            # Fresh review flags and quality scores now, rather than at the next 03:45 / 04:00 beat.
            review_flags_update(today=timezone.now().date())
            quality_scores_update(now=timezone.now())
        # The active space is the one searches use, even when EMBEDDING_PROVIDER names another model: that
        # one is built beside it by the worker (below), so the build keeps the active space complete.
        worker = not opts.get("no_worker")
        vectors = embeddings_pending(active_space().model).count()
        pending = indexing.columns_pending().count() + (0 if worker else vectors)
        if pending:
            with progress_bar(self, total=pending, desc="index") as update:
                indexing.index_rebuild(progress=update, embed=not worker)
        else:
            indexing.stats_refresh()
        if worker and vectors:
            noun = "passage" if vectors == 1 else "passages"
            self.stdout.write(
                f"Searchable by words now; the worker embeds {vectors} {noun} for search by meaning "
                "(progress in the admin, Embedding spaces)."
            )
        self._embedding_switch_announce(background=worker)
        return worker and bool(vectors)

    def _embedding_switch_announce(self, *, background: bool) -> None:
        """One line when the configured embedding model is not the one searches use, and the switch queued
        for the worker (it also starts from the beat)."""
        from search.services.reembed import space_switch_status

        status = space_switch_status()
        if not status.needed:
            return
        self.stdout.write(self.style.WARNING(status.summary(background=background)))
        if background:
            from search.tasks import embedding_space_switch_enqueue

            embedding_space_switch_enqueue()
