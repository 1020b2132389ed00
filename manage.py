#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    if sys.argv[1:2] == ["up"]:
        # `up` owns the embedded Valkey; other commands reuse it while it runs.
        os.environ["KB_VALKEY_OWNER"] = "1"
    from django.core.management import execute_from_command_line

    from config.schema import schema_ensure

    # A command that reads the tables finds them up to date (embedded PostgreSQL: migrated now), or refuses in
    # one line that says to run `manage.py migrate` (DATABASE_URL).
    schema_ensure(sys.argv)
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
