"""Mounted at ``/api/presets/`` by config/urls.py."""

from django.urls import path

from presets import views

app_name = "presets"

urlpatterns = [
    path("", views.presets_collection, name="collection"),
    path("import/", views.preset_import, name="import"),
    path("validate/", views.preset_validate, name="validate"),
    path("<int:preset_id>/", views.preset_detail, name="detail"),
    path("<int:preset_id>/restore/", views.preset_restore, name="restore"),
    path("<int:preset_id>/apply/", views.preset_apply, name="apply"),
]
