from django.urls import path

from analytics import views

urlpatterns = [
    path("metrics", views.metrics_view, name="metrics"),
    path("api/analytics/click", views.click_view, name="api-analytics-click"),
]
