"""Test settings: the embedded servers run in a temporary folder for the test session.

With ``DATABASE_URL`` / ``REDIS_URL`` set, those servers are used instead.
"""

import os
import tempfile

if not os.environ.get("KB_HOME"):
    os.environ["KB_HOME"] = tempfile.mkdtemp(prefix="kb-test-")
    os.environ["KB_EPHEMERAL"] = "1"
os.environ.setdefault("EMBEDDING_PROVIDER", "hash")

from config.settings.base import *  # noqa: E402,F403
from config.settings.base import DATABASES, KB_HOME  # noqa: E402

if DATABASES["default"]["ENGINE"] == "config.embedded_db":
    from config import runtime

    _url = runtime.ensure_postgres(KB_HOME, ephemeral=os.environ.get("KB_EPHEMERAL") == "1")
    os.environ["DATABASE_URL"] = _url  # subprocesses (workers, live servers) share the server
    from config.env import parse_database_url

    DATABASES["default"].update(parse_database_url(_url))
    DATABASES["default"]["ENGINE"] = "django.db.backends.postgresql"

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEBUG = False
SEARCH_AUTO_BUILD = False
