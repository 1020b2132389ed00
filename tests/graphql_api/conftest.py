"""Helpers for the GraphQL tests: a POST helper and a small corpus built through the real services."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.factories import build, make_item


def gql(
    client: Client, query: str, variables: dict[str, Any] | None = None, **extra: Any
) -> tuple[int, dict[str, Any]]:
    """POST one operation to /graphql; returns (status, decoded JSON body)."""
    body = {"query": query, "variables": variables or {}}
    response = client.post("/graphql", data=json.dumps(body), content_type="application/json", **extra)
    return response.status_code, response.json()


@pytest.fixture
def staff_client(db: Any) -> Client:
    user = get_user_model().objects.create_user("staff", "staff@example.com", "pw-staff-123", is_staff=True)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def user_client(db: Any) -> Client:
    user = get_user_model().objects.create_user("reader", "reader@example.com", "pw-reader-123")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def permission_corpus(db: Any) -> dict[str, Any]:
    """Public, draft, staff-only, signed-in and group items that all match the word 'harbour'."""
    items = {
        "public": make_item(title="Harbour safety guide", body="Harbour safety rules for every visitor."),
        "draft": make_item(
            title="Harbour draft plan", body="Harbour draft plan not yet published.", publish=False
        ),
        "staff": make_item(title="Harbour staff notes", body="Harbour notes for staff.", visibility="staff"),
        "signed_in": make_item(
            title="Harbour member notes", body="Harbour notes for members.", visibility="signed_in"
        ),
        "group": make_item(
            title="Harbour pilots handbook",
            body="Harbour pilots only.",
            visibility="groups",
            groups=["pilots"],
        ),
    }
    build()
    return items
