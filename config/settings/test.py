"""Test settings: the embedded servers run in a temporary folder for the test session.

With ``DATABASE_URL`` / ``REDIS_URL`` set, those servers are used instead.
"""

import os
import tempfile

if not os.environ.get("KB_HOME"):
    os.environ["KB_HOME"] = tempfile.mkdtemp(prefix="kb-test-")
    os.environ["KB_EPHEMERAL"] = "1"
os.environ.setdefault("EMBEDDING_PROVIDER", "hash")
# The e5 model converted for ONNX Runtime is kept across test runs (var/ is not tracked): converting takes
# seconds, and a KB_HOME of its own is made for every run.
os.environ.setdefault(
    "KB_MODEL_CACHE", os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "var", "models")
)

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
# Every test searches with the toy confidence calibration, fitted on the demo with the hash embedder
# (tests/support/toy_calibration.py; refit it with KB_REFIT_TOY_CALIBRATION=1 and
# tests/search/engine/test_toy_calibration.py).
# The English lane (a second embedder) is off: tests that are about it turn it on with a hash embedder.
SEARCH = {  # noqa: F405
    **SEARCH,  # noqa: F405
    "CONFIDENCE_TABLE": str(BASE_DIR / "tests" / "fixtures" / "confidence_toy.json"),  # noqa: F405
    "ENGLISH_LANE": "off",
}
