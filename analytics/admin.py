"""Admin: the query log (read-only) with its analytics report, synonyms and content-gap notes.

The report (``/admin/analytics/querylog/report/``, staff with the "view query log" permission) shows top
queries, zero-result queries (each one click from a synonym or a content-gap note), queries nobody opened,
agent retry loops, the slowest searches with per-lane timings and an "explain" button, and a per-surface
summary.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.postgres.forms import SimpleArrayField
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import F, Func, TextField, Value
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from analytics import selectors, services
from analytics.explain import ExplainUnavailable, querylog_explain
from analytics.models import ContentGap, QueryLog
from search.admin_readonly import ReadOnlyAdmin
from search.models import Synonym

DAY_CHOICES = (1, 7, 30, 90)
DEFAULT_DAYS = 7


def _days(request: HttpRequest) -> int:
    try:
        days = int(request.GET.get("days", DEFAULT_DAYS))
    except ValueError:
        return DEFAULT_DAYS
    return days if days in DAY_CHOICES else DEFAULT_DAYS


@admin.register(QueryLog)
class QueryLogAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "surface",
        "tool",
        "principal_kind",
        "query",
        "result_count",
        "partial_match",
        "degraded_list",
        "total_ms_rounded",
        "lexical_ms_rounded",
        "vector_ms_rounded",
        "clicked_item_id",
    ]
    list_filter = ["surface", "tool", "principal_kind", "partial_match", "paged", "corpus"]
    search_fields = ["query_text"]
    date_hierarchy = "created_at"
    list_per_page = 100
    show_full_result_count = False
    change_list_template = "admin/analytics/querylog/change_list.html"

    @admin.display(description="query", ordering="query_text")
    def query(self, obj: QueryLog) -> str:
        return obj.display_text[:120]

    @admin.display(description="degraded")
    def degraded_list(self, obj: QueryLog) -> str:
        return ", ".join(obj.degraded or [])

    @admin.display(description="total ms", ordering="total_ms")
    def total_ms_rounded(self, obj: QueryLog) -> str:
        return f"{obj.total_ms:.0f}"

    @admin.display(description="lexical ms", ordering="lexical_ms")
    def lexical_ms_rounded(self, obj: QueryLog) -> str:
        return "" if obj.lexical_ms is None else f"{obj.lexical_ms:.0f}"

    @admin.display(description="vector ms", ordering="vector_ms")
    def vector_ms_rounded(self, obj: QueryLog) -> str:
        return "" if obj.vector_ms is None else f"{obj.vector_ms:.0f}"

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("report/", wrap(self.report_view), name="analytics_querylog_report"),
            path("<int:pk>/explain/", wrap(self.explain_view), name="analytics_querylog_explain"),
            path("zero/synonym/", wrap(require_POST(self.synonym_view)), name="analytics_querylog_synonym"),
            path("zero/gap/", wrap(require_POST(self.gap_view)), name="analytics_querylog_gap"),
            *super().get_urls(),
        ]

    def _require(self, request: HttpRequest, perm: str) -> None:
        if not request.user.has_perm(perm):
            raise PermissionDenied

    def report_view(self, request: HttpRequest) -> HttpResponse:
        self._require(request, "analytics.view_querylog")
        days = _days(request)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Search analytics",
            "days": days,
            "day_choices": DAY_CHOICES,
            "surfaces": selectors.surface_summary(days=days),
            "top": selectors.top_queries(days=days),
            "zero": selectors.zero_result_queries(days=days),
            "no_click": selectors.no_click_queries(days=days),
            "loops": selectors.retry_loops(days=days),
            "slowest": selectors.slowest_queries(days=days),
            "retry_window_s": selectors.RETRY_WINDOW_S,
            "retry_min": selectors.RETRY_MIN_SEARCHES,
            "can_add_synonym": request.user.has_perm("search.add_synonym"),
            "can_add_gap": request.user.has_perm("analytics.add_contentgap"),
        }
        return TemplateResponse(request, "admin/analytics/report.html", context)

    def explain_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        self._require(request, "analytics.view_querylog")
        log = get_object_or_404(QueryLog, pk=pk)
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Explain: {log.display_text[:80]}",
            "log": log,
            "report": None,
            "error": "",
        }
        if request.method == "POST":
            try:
                context["report"] = querylog_explain(log=log)
            except ExplainUnavailable as exc:
                context["error"] = exc.message
        return TemplateResponse(request, "admin/analytics/explain.html", context)

    def _back(self, request: HttpRequest) -> HttpResponseRedirect:
        days = _days(request) if "days" in request.GET else request.POST.get("days", DEFAULT_DAYS)
        return HttpResponseRedirect(f"{reverse('admin:analytics_querylog_report')}?days={days}#zero")

    def synonym_view(self, request: HttpRequest) -> HttpResponse:
        self._require(request, "search.add_synonym")
        try:
            synonym = services.synonym_create_from_query(
                query_hash=request.POST.get("query_hash", ""),
                means=request.POST.get("means", ""),
                language=request.POST.get("language", ""),
                one_way=request.POST.get("two_way") != "on",
            )
        except ValidationError as exc:
            self.message_user(request, " ".join(exc.messages), messages.ERROR)
        else:
            url = reverse("admin:search_synonym_change", args=[synonym.pk])
            self.message_user(
                request, format_html('Synonym created: <a href="{}">{}</a>', url, synonym), messages.SUCCESS
            )
        return self._back(request)

    def gap_view(self, request: HttpRequest) -> HttpResponse:
        self._require(request, "analytics.add_contentgap")
        try:
            gap, created = services.content_gap_create(
                query_hash=request.POST.get("query_hash", ""),
                note=request.POST.get("note", ""),
                user=request.user,
            )
        except ValidationError as exc:
            self.message_user(request, " ".join(exc.messages), messages.ERROR)
        else:
            url = reverse("admin:analytics_contentgap_change", args=[gap.pk])
            verb = "Content gap noted" if created else "Already noted (count updated)"
            self.message_user(
                request, format_html('{}: <a href="{}">{}</a>', verb, url, gap), messages.SUCCESS
            )
        return self._back(request)


class SynonymForm(forms.ModelForm):
    terms = SimpleArrayField(
        forms.CharField(max_length=200),
        delimiter=",",
        help_text="Words or phrases separated by commas. One-way: the first expands to the others.",
    )

    class Meta:
        model = Synonym
        fields = ["terms", "one_way", "language"]


@admin.register(Synonym)
class SynonymAdmin(admin.ModelAdmin):
    form = SynonymForm
    list_display = ["__str__", "language", "one_way", "created_at"]
    list_filter = ["one_way", "language"]
    search_fields = ["language"]  # shows the search box; the search itself is below
    readonly_fields = ["created_at"]

    def get_search_results(self, request: HttpRequest, queryset: Any, search_term: str) -> tuple[Any, bool]:
        if not search_term:
            return queryset, False
        # terms is an array: search its comma-joined text.
        joined = Func(F("terms"), Value(","), function="array_to_string", output_field=TextField())
        return queryset.annotate(terms_text=joined).filter(terms_text__icontains=search_term.strip()), False


@admin.register(ContentGap)
class ContentGapAdmin(admin.ModelAdmin):
    list_display = ["query_text", "searches", "status", "created_at", "created_by"]
    list_filter = ["status"]
    list_editable = ["status"]
    search_fields = ["query_text", "note"]
    readonly_fields = ["query_hash", "searches", "created_at", "created_by"]
    fields = ["query_text", "note", "status", "searches", "query_hash", "created_at", "created_by"]
