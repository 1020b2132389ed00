"""The Celery beat schedule: one place, a comment per entry. Times are UTC (``CELERY_TIMEZONE``).

Daily jobs claim their period (``search.services.jobs``), so running two beat processes by mistake
still applies each daily job once per day. ``expires`` drops a message no worker picked up before the
next firing, so a worker that was down for days does not replay a backlog.
"""

from datetime import timedelta

from celery.schedules import crontab

from config import env

# (hour, minute) UTC of the daily jobs; ``search.tasks`` derives each run's period from them.
REVIEW_FLAGS_AT = (3, 45)
QUALITY_SCORES_AT = (4, 0)

_DAY_S = 24 * 3600
# How often followed searches are run (follows app).
FOLLOWS_EVERY_MINUTES = env.env_int("FOLLOWS_EVERY_MINUTES", 15, minimum=1, maximum=24 * 60)

CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    # Review-cadence flagger: items whose next review date is past become `review_overdue`, those due
    # within 30 days `due_soon`, the rest `ok` (the `overdue_review` filter on every surface reads it).
    "review-cadence-flagger": {
        "task": "search.review_flags",
        "schedule": crontab(hour=REVIEW_FLAGS_AT[0], minute=REVIEW_FLAGS_AT[1]),
        "options": {"expires": _DAY_S - 3600},
    },
    # Quality score of every item (freshness, completeness, review-cadence penalty), after the flagger.
    "quality-score": {
        "task": "search.quality_scores",
        "schedule": crontab(hour=QUALITY_SCORES_AT[0], minute=QUALITY_SCORES_AT[1]),
        "options": {"expires": _DAY_S - 3600},
    },
    # Index build safety net: content changes already enqueue a debounced build; this catches a build
    # whose message was lost (broker restart). Returns at once when the index is clean.
    "index-build": {
        "task": "search.index_build",
        "schedule": crontab(minute="*/10"),
        "options": {"expires": 9 * 60},
    },
    # Embedding backfill: chunks without a vector of the active model (e.g. saved while the provider
    # was down), in batches, backing off while the provider keeps failing. A no-op when none are missing.
    "embedding-backfill": {
        "task": "search.embeddings_backfill",
        "schedule": crontab(minute="5,35"),
        "options": {"expires": 25 * 60},
    },
    # Embedding-model switch: when EMBEDDING_PROVIDER names another model than the space searches use,
    # build the new space beside it (in 5-minute slices that re-queue themselves) and flip atomically once
    # complete. Returns at once when they match; resumes a build a restart interrupted.
    "embedding-space-switch": {
        "task": "search.embedding_space_switch",
        "schedule": crontab(minute="*/10"),
        "options": {"expires": 9 * 60},
    },
    # Housekeeping: forget job runs older than 180 days (Sundays 05:00).
    "job-runs-prune": {
        "task": "search.job_runs_prune",
        "schedule": crontab(hour=5, minute=0, day_of_week=0),
        "options": {"expires": _DAY_S},
    },
    # Followed searches: every FOLLOWS_EVERY_MINUTES (default 15), each follow runs through the engine as its
    # owner and records what is new or changed since the last run (then the e-mail digest, when it is on).
    # Idempotent, one run at a time; a message not picked up before the next firing is dropped.
    "follows-run": {
        "task": "follows.run_all",
        "schedule": timedelta(minutes=FOLLOWS_EVERY_MINUTES),
        "options": {"expires": max(30, FOLLOWS_EVERY_MINUTES * 60 - 30)},
    },
    # Deleted presets (presets app): a deleted preset stays restorable for 30 days, then this removes it
    # (daily at 04:40; idempotent, recorded as a job run).
    "presets-purge": {
        "task": "presets.purge_deleted",
        "schedule": crontab(hour=4, minute=40),
        "options": {"expires": _DAY_S - 3600},
    },
    # Query-log retention (analytics): delete search log rows older than QUERY_LOG_RETENTION_DAYS
    # (default 90), daily at 04:30. Idempotent, in batches; a missed day is caught up by the next run.
    "querylog-purge": {
        "task": "analytics.querylog_purge",
        "schedule": crontab(hour=4, minute=30),
        "options": {"expires": _DAY_S - 3600},
    },
}
