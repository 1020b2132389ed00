"""Diagnostic search from the command line, through the same engine as every other surface."""

from __future__ import annotations

import json
import shutil
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from search.embeddings.spaces import lane_warm
from search.engine import retrieve
from search.errors import SearchError
from search.federation.federated import LOCAL, FederatedResult, federated_search, sources_parse
from search.principal import Principal
from search.text.query_parser import validate_query_text
from search.types import CLI_THRESHOLD, MAX_LIMIT, RetrievalQuery, SearchFilters

OPERATOR = Principal(kind="staff", all_content=True)


class Command(BaseCommand):
    help = "Search the knowledge base (diagnostic). Same engine as browse, GraphQL and MCP."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("query")
        parser.add_argument("--limit", type=int, default=10)
        parser.add_argument("--domain", help="primary domain (case-insensitive)")
        parser.add_argument("--threshold", type=float, default=CLI_THRESHOLD,
                            help=f"confidence floor 0-1 (default {CLI_THRESHOLD}); 0 lists every candidate")
        parser.add_argument("--full", action="store_true", help="add each item's summary")
        parser.add_argument("--json", action="store_true", help="print one JSON object and nothing else")
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--include-superseded", dest="superseded", action="store_true", default=True)
        group.add_argument("--exclude-superseded", dest="superseded", action="store_false")
        parser.add_argument("--corpus", choices=["live", "latest"], default="latest")
        parser.add_argument("--granularity", choices=["item", "chunk"], default="item")
        parser.add_argument("--mode", choices=["hybrid", "lexical", "vector"], default="hybrid")
        parser.add_argument("--sources", default=None,
                            help="also search peer knowledge bases: 'all' or names, e.g. local,emea (default: local)")
        parser.add_argument("--env", choices=["dev", "prod"], default=None,
                            help="prod: refuse unless the configured database is the production one")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            self._check_env(opts["env"])
            if not 1 <= opts["limit"] <= MAX_LIMIT:
                raise SearchError(f"--limit must be between 1 and {MAX_LIMIT}.")
            if not 0.0 <= opts["threshold"] <= 1.0:
                raise SearchError(f"--threshold must be between 0 and 1 (got {opts['threshold']}).")
            text = validate_query_text(opts["query"], field="query")
            if opts["mode"] != "lexical":
                lane_warm()  # the model loads before the search's embedding budget starts
            sources = sources_parse(opts["sources"])
            query = RetrievalQuery(
                text=text,
                principal=OPERATOR,
                corpus=opts["corpus"],
                filters=SearchFilters(domain=(opts["domain"],) if opts["domain"] else (),
                                      include_superseded=opts["superseded"]),
                granularity=opts["granularity"],
                mode=opts["mode"],
                limit=opts["limit"],
                threshold=opts["threshold"],
                surface="cli",
            )
            if sources != (LOCAL,):
                federated = federated_search(query, sources=sources)
            else:
                result = retrieve(query=query)
        except (SearchError, DatabaseError, ValueError) as exc:
            message = getattr(exc, "message", None) or str(exc).strip().splitlines()[0]
            raise CommandError(f"Search failed: {message}") from None
        if sources != (LOCAL,):
            self._federated(text, federated, as_json=opts["json"])
        elif opts["json"]:
            self.stdout.write(json.dumps(payload(text, result, full=opts["full"]), ensure_ascii=False))
        else:
            self._table(text, result, full=opts["full"], threshold=opts["threshold"])

    def _federated(self, text: str, result: FederatedResult, *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps({
                "query": text,
                "count": result.total,
                "sources": [{"name": s.name, "status": s.status, "ms": s.ms, "count": s.count, "detail": s.detail}
                            for s in result.sources],
                "results": [{"title": h.title, "url": h.url, "source": h.source, "sources": list(h.sources),
                             "confidence": h.confidence, "lanes": list(h.lanes), "snippet": h.snippet}
                            for h in result.hits],
            }, ensure_ascii=False))
            return
        self.stdout.write(f"{result.total} result(s) for {text!r} across "
                          + ", ".join(f"{s.name} ({s.status}, {s.ms} ms)" for s in result.sources))
        for report in result.sources:
            if report.detail:
                self.stdout.write(f"  {report.name}: {report.detail}")
        for hit in result.hits:
            snippet = " ".join(hit.snippet.split())[:80]
            where = ", ".join(hit.sources)
            self.stdout.write(f"{hit.confidence:.2f}  [{where}]  {hit.title[:60]}  {hit.url}  {snippet}")

    def _check_env(self, env: str | None) -> None:
        if env != "prod":
            return
        expected = settings.PRODUCTION_DATABASE_NAME
        actual = settings.DATABASES["default"].get("NAME")
        if not expected or actual != expected:
            raise SearchError(
                f"--env=prod but the configured database is {actual!r}, not the production one "
                f"({expected or 'PRODUCTION_DATABASE_NAME is unset'}). Run with the production settings inline, "
                "e.g. DATABASE_URL=postgres://…/kb PRODUCTION_DATABASE_NAME=kb python manage.py kb_search …"
            )

    def _table(self, text: str, result: Any, *, full: bool, threshold: float) -> None:
        color = self.stdout.isatty() if hasattr(self.stdout, "isatty") else sys.stdout.isatty()
        style = self.style if color else None
        width = shutil.get_terminal_size((140, 20)).columns
        header = f"{result.total} result(s) for {text!r}"
        if result.partial_match:
            header += " — partial match: no result holds every word (see 'missing')"
        if result.degraded:
            header += f" — degraded: {', '.join(result.degraded)}"
        if result.suggestion:
            header += f" — did you mean {result.suggestion!r}?"
        self.stdout.write(style.MIGRATE_HEADING(header) if style else header)
        if not result.hits:
            self.stdout.write(f"No item in the knowledge base matches {text!r} (confidence floor {threshold:g}).")
            for hit in result.nearest:
                self.stdout.write(f"  nearest, not a match: {hit.title} (confidence {hit.confidence:.2f})")
            return
        columns = [("title", 40), ("conf", 5), ("domain", 16), ("keywords", 22), ("lanes", 22)]
        snippet_width = max(20, width - sum(w + 2 for _, w in columns) - 8)
        line = "  ".join(f"{name:<{w}}" for name, w in columns) + f"  {'snippet':<{snippet_width}}"
        self.stdout.write(style.SQL_FIELD(line) if style else line)
        for hit in result.hits:
            snippet = " ".join(hit.passage.split())[:snippet_width]
            cells = [hit.title, f"{hit.confidence:.2f}", hit.primary_domain, ", ".join(hit.ai_keywords), hit.lanes_text]
            row = "  ".join(f"{(c or '')[:w]:<{w}}" for c, (_, w) in zip(cells, columns, strict=True))
            self.stdout.write(f"{row}  {snippet}")
            if hit.missing_words:
                self.stdout.write(f"    missing: {', '.join(hit.missing_words)}")
            if full and hit.summary:
                self.stdout.write(f"    {hit.summary}")


def payload(text: str, result: Any, *, full: bool = False) -> dict[str, Any]:
    return {
        "query": text,
        "count": result.total,
        "partial_match": result.partial_match,
        "degraded": list(result.degraded),
        "suggestion": result.suggestion,
        "nearest": [{"item_id": h.item_id, "title": h.title, "confidence": h.confidence} for h in result.nearest],
        "results": [
            {
                "item_id": h.item_id,
                "external_id": h.external_id,
                "title": h.title,
                "score": h.score,
                "confidence": h.confidence,
                "lanes": list(h.lanes),
                "lane_ranks": dict(h.lane_ranks),
                "missing_words": list(h.missing_words),
                "snippet": h.passage,
                "toc_path": h.toc_path,
                **({"summary": h.summary} if full else {}),
            }
            for h in result.hits
        ],
    }
