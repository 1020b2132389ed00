"""The admin's "explain" button: re-run a logged search and show PostgreSQL's plan of each statement.

The search is re-run through ``search.engine.retrieve`` (the real engine, nothing copied) while
``connection.execute_wrapper`` captures its SQL. Each captured ``SELECT`` is then explained with
``EXPLAIN (ANALYZE, BUFFERS)`` inside a READ ONLY transaction that is rolled back, after replaying the
``SET`` statements the engine issued (e.g. HNSW scan settings), under a statement timeout. Nothing is
written; the re-run itself is neither logged nor measured (surface ``explain``).

The re-run uses the logged principal *kind*: signed-out searches run as a signed-out visitor, every other
kind as staff on the logged corpus, so plans of group-restricted users are an approximation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, connection, transaction

from analytics.models import QueryLog
from analytics.receivers import EXPLAIN_SURFACE
from analytics.services import filters_from_json
from search.engine import retrieve
from search.principal import ANONYMOUS, Principal
from search.types import SITE_THRESHOLD, RetrievalQuery, RetrievalResult

MAX_STATEMENTS = 20
PLAN_MAX_CHARS = 20_000
PARAMS_MAX_CHARS = 600
STATEMENT_TIMEOUT_MS = 10_000


class ExplainUnavailable(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class ExplainedStatement:
    sql: str
    params: str
    plan: str


def _params(params: Any) -> str:
    text = repr(params) if params else ""
    return text if len(text) <= PARAMS_MAX_CHARS else text[:PARAMS_MAX_CHARS] + " …"


@dataclass
class ExplainReport:
    log: QueryLog
    result: RetrievalResult
    statements: list[ExplainedStatement] = field(default_factory=list)
    skipped: int = 0


def _query_for(log: QueryLog) -> RetrievalQuery:
    if not log.query_text and log.similar_to is None:
        raise ExplainUnavailable(
            "The text of this search was not stored (a signed-out visitor's search), so it cannot be re-run. "
            "Turn on QUERY_LOG_ANONYMOUS_TEXT to keep signed-out visitors' queries."
        )
    principal = ANONYMOUS if log.principal_kind == "anonymous" else Principal(kind="staff", all_content=True)
    return RetrievalQuery(
        text=log.query_text,
        principal=principal,
        corpus="live" if log.corpus != "latest" else "latest",
        filters=filters_from_json(log.filters),
        granularity="chunk" if log.granularity == "chunk" else "item",
        mode=log.mode if log.mode in ("hybrid", "lexical", "vector") else "hybrid",  # type: ignore[arg-type]
        limit=20,
        threshold=log.threshold if log.threshold is not None else SITE_THRESHOLD,
        similar_to=log.similar_to,
        surface=EXPLAIN_SURFACE,
    )


def _head(sql: str) -> str:
    return sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""


def querylog_explain(*, log: QueryLog) -> ExplainReport:
    """Re-run ``log``'s search and explain its statements (read-only). Raises ``ExplainUnavailable``."""
    query = _query_for(log)
    captured: list[tuple[str, Any]] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if not many:
            captured.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        result = retrieve(query=query)
    report = ExplainReport(log=log, result=result)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION READ ONLY")
            cursor.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
            for sql, params in captured:
                head = _head(sql)
                if head == "SET":
                    cursor.execute(sql, params)  # reverted with the transaction
                    continue
                if head not in ("SELECT", "WITH") or len(report.statements) >= MAX_STATEMENTS:
                    report.skipped += 1
                    continue
                try:
                    cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) " + sql, params)
                    plan = "\n".join(str(row[0]) for row in cursor.fetchall())
                except DatabaseError as exc:  # e.g. the statement timeout: the transaction is done
                    report.statements.append(
                        ExplainedStatement(sql, _params(params), f"EXPLAIN failed: {exc}")
                    )
                    break
                report.statements.append(ExplainedStatement(sql, _params(params), plan[:PLAN_MAX_CHARS]))
        transaction.set_rollback(True)
    return report
