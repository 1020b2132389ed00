from django.urls import path

from browse import views

urlpatterns = [
    path("", views.home, name="home"),
    path("browse", views.browse, name="browse"),
]
