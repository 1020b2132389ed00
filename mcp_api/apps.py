from django.apps import AppConfig


class McpApiConfig(AppConfig):
    name = "mcp_api"
    verbose_name = "MCP API"

    def ready(self) -> None:
        from analytics.middleware import register_tool_names
        from mcp_api.tools import TOOLS

        register_tool_names(spec.name for spec in TOOLS)  # the metrics' bounded tool label
