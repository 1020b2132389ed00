from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "browse/home.html")


def browse(request: HttpRequest) -> HttpResponse:
    return render(request, "browse/browse.html")
