import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
# A web process: the settings cap each SQL statement at STATEMENT_TIMEOUT_MS (workers and commands are not).
os.environ.setdefault("KB_PROCESS_ROLE", "web")
application = get_wsgi_application()
