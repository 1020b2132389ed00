from django.apps import AppConfig


class GraphqlApiConfig(AppConfig):
    name = "graphql_api"
    verbose_name = "GraphQL API"
