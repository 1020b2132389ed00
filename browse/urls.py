from django.urls import path

from browse import api, federation_api, follow_views, views

urlpatterns = [
    path("", views.home, name="home"),
    path("browse", views.browse, name="browse"),
    path("search", views.search_page, name="search"),
    path("items/<str:slug>", views.item_detail, name="item"),  # slugs keep Arabic and accented letters
    path("profile/focus", views.focus_set, name="focus-set"),
    path("follows", follow_views.follows_page, name="follows"),
    path("follows/new", follow_views.follow_create, name="follow-create"),
    path("follows/digest", follow_views.follow_digest, name="follow-digest"),
    path("follows/<int:follow_id>/seen", follow_views.follow_mark_seen, name="follow-seen"),
    path("follows/<int:follow_id>/delete", follow_views.follow_delete, name="follow-delete"),
    path("api/search/preview", api.search_preview, name="api-search-preview"),
    path("api/search", api.search_api, name="api-search"),
    path("api/federation/search", federation_api.federation_search, name="api-federation-search"),
    path("api/federation/info", federation_api.federation_info_view, name="api-federation-info"),
    path("api/recent-searches", api.recent_searches, name="api-recent-searches"),
]
