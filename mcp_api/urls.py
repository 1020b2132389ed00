from django.urls import path

from mcp_api.views import McpView

app_name = "mcp_api"

urlpatterns = [
    path("mcp", McpView.as_view(), name="mcp"),
]
