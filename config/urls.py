from django.contrib import admin
from django.urls import include, path

# A database outage outside a view answers 503, not 500 (config/middleware.py).
handler500 = "config.middleware.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/presets/", include("presets.urls")),
    path("", include("graphql_api.urls")),
    path("", include("mcp_api.urls")),
    path("", include("analytics.urls")),
    path("", include("browse.urls")),
]
