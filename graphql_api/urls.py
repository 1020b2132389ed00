from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from graphql_api.views import ProtectedGraphQLView

# Queries need no CSRF token; the view checks it itself for mutations (see graphql_api/views.py).
urlpatterns = [
    path("graphql", csrf_exempt(ProtectedGraphQLView.as_view()), name="graphql"),
]
