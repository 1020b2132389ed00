from django.urls import path

from browse import api, views

urlpatterns = [
    path("", views.home, name="home"),
    path("browse", views.browse, name="browse"),
    path("search", views.search_page, name="search"),
    path("items/<str:slug>", views.item_detail, name="item"),  # slugs keep Arabic and accented letters
    path("profile/focus", views.focus_set, name="focus-set"),
    path("api/search/preview", api.search_preview, name="api-search-preview"),
    path("api/search", api.search_api, name="api-search"),
    path("api/recent-searches", api.recent_searches, name="api-recent-searches"),
]
