"""`make lint`'s dead-code pass: functions, methods and classes of the product that nothing calls (vulture).

Vulture reads the product and the tests (a helper the tests call is not dead) and reports at 60 % confidence
what no code names. Code that the frameworks call by convention (Django admin, commands, routers, signal
receivers, template tags, Celery tasks, GraphQL resolvers, pydantic validators) is passed over by the rules
below, and so is a name the templates or migrations use; what is left must be called somewhere or removed.
Variables and attributes are not checked: model fields, settings and serializer fields are read by name,
which vulture cannot see.

    python scripts/dead_code.py        # exit 1 and one line per dead definition
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from vulture import Vulture

ROOT = Path(__file__).resolve().parent.parent
WORD = re.compile(r"\w+")
PACKAGES = [
    "search", "accounts", "presets", "analytics", "browse", "graphql_api", "mcp_api", "benchmarks", "config",
    "adapters", "follows", "tests", "manage.py",
]
EXCLUDE = ["*/migrations/*"]
# Called by a framework, by name or through a decorator.
IGNORE_DECORATORS = [
    "@admin.register", "@admin.action", "@admin.display", "@receiver", "@register.filter", "@register.simple_tag",
    "@register.inclusion_tag", "@shared_task", "@app.task", "@*.task", "@atexit.register", "@*.connect",
    "@*.tool", "@field_validator", "@model_validator", "@pytest.fixture", "@*.setter", "@classmethod",
]
IGNORE_NAMES = [
    # Django: commands, apps, routers, middleware, admin, forms, views
    "Command", "add_arguments", "handle", "*Config", "ready", "*Router", "db_for_read", "db_for_write",
    "allow_relation", "allow_migrate", "*Middleware", "process_view", "process_exception", "*Admin", "get_*",
    "has_*_permission", "save_model", "delete_model", "changelist_view", "*_view", "clean*", "Meta",
    "urlpatterns", "*Scheduler", "HealthEndpoints",
    # graphene and graphql-core
    "resolve_*", "mutate", "format_error", "execute_graphql_request", "enter_*", "leave_*", "load_many",
    "batch_load_fn",
    # the MCP server's handlers
    "list_tools", "call_tool",
    # graphene mutations' arguments
    "Arguments",
    # tests: pytest's hooks and test functions; the standard library's handlers (http.server, HTMLParser, aiosmtpd)
    "test_*", "pytest_*", "Test*", "do_GET", "do_POST", "log_message", "handle_*",
]
# Kept on purpose though nothing calls them yet: (file, name, why).
ALLOW = [
    ("search/management/commands/federation_peer.py", "_add", "dispatched by name: getattr(self, f'_{action}')"),
    ("search/management/commands/federation_peer.py", "_list", "dispatched by name"),
    ("search/management/commands/federation_peer.py", "_remove", "dispatched by name"),
    ("search/management/commands/federation_peer.py", "_check", "dispatched by name"),
    ("search/federation/client.py", "set_ok", "http.cookiejar's policy hook: the jar calls it"),
]
# Names templates and migrations use (vulture reads neither): a definition one of them names is in use.
NAMED_ELSEWHERE = ["templates/**/*.html", "*/templates/**/*.html", "*/migrations/*.py"]


def main() -> int:
    vulture = Vulture(ignore_names=IGNORE_NAMES, ignore_decorators=IGNORE_DECORATORS)
    vulture.scavenge([str(ROOT / p) for p in PACKAGES], exclude=EXCLUDE)
    allowed = {(f, n) for f, n, _ in ALLOW}
    named = {
        word for pattern in NAMED_ELSEWHERE for path in ROOT.glob(pattern) for word in WORD.findall(path.read_text())
    }
    dead = []
    for item in vulture.get_unused_code(min_confidence=60, sort_by_size=False):
        if item.typ not in ("function", "method", "class", "property"):
            continue
        path = Path(item.filename).resolve().relative_to(ROOT).as_posix()
        if (path, item.name) in allowed or item.name in named:
            continue
        dead.append(f"{path}:{item.first_lineno}: unused {item.typ} '{item.name}'")
    for line in dead:
        print(line)
    if dead:
        print(f"{len(dead)} definition(s) nothing calls: call them, remove them, or (rarely) allow them in {__file__}")
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main())
