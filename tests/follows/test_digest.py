"""The e-mail digest through Django's SMTP backend, against a real SMTP server (aiosmtpd) started here."""

from __future__ import annotations

import email
from collections.abc import Iterator
from email.message import Message
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from follows import services
from follows.models import FollowItem
from search.models import ContentItem
from tests.follows.conftest import publish
from tests.mcp_api.client import free_port

pytestmark = pytest.mark.django_db


class Inbox:
    """aiosmtpd handler: keeps every message it receives."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Message]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's hook
        self.messages.append((list(envelope.rcpt_tos), email.message_from_bytes(envelope.content)))
        return "250 Message accepted for delivery"


@pytest.fixture
def smtp(settings: Any) -> Iterator[Inbox]:
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"  # real SMTP, not locmem
    settings.EMAIL_HOST, settings.EMAIL_PORT = controller.hostname, controller.port
    settings.EMAIL_USE_TLS = False
    settings.DEFAULT_FROM_EMAIL = "kb@example.com"
    settings.FOLLOWS_DIGEST = True
    settings.SITE_URL = "https://kb.example.com"
    try:
        yield inbox
    finally:
        controller.stop()


def _body(message: Message) -> str:
    payload = message.get_payload(decode=True)
    assert isinstance(payload, bytes)
    return payload.decode()


def test_one_digest_per_opted_in_user_after_a_run_that_found_something(
    smtp: Inbox, reader: Any, other_reader: Any, pricing: dict[str, Any]
) -> None:
    # given two users following the same search; only the reader asked for the digest
    services.follow_digest_set(owner=reader, enabled=True)
    services.follow_create(owner=reader, query="pricing policy", label="Pricing")
    services.follow_create(owner=other_reader, query="pricing policy")

    # when nothing is new, no e-mail goes
    assert services.follows_run_all().digests == 0 and smtp.messages == []

    # when an editor publishes two matching items and the job runs
    fresh = publish("Pricing policy for frameworks", "The pricing policy for frameworks.")
    publish("Pricing policy annex", "An annex of the pricing policy.")
    report = services.follows_run_all()

    # then the reader got one digest over SMTP, listing both, with links to the site
    assert report.digests == 1
    [(to, message)] = smtp.messages
    assert to == ["ada@example.com"] and message["From"] == "kb@example.com"
    assert message["Subject"] == "2 new for the searches you follow"
    body = _body(message).replace("\r\n", "\n")
    assert "Pricing\n" in body and "[New] Pricing policy for frameworks" in body
    assert f"https://kb.example.com{fresh.get_absolute_url()}" in body and "https://kb.example.com/follows" in body

    # when the job runs again, nothing is sent twice
    assert services.follows_run_all().digests == 0 and len(smtp.messages) == 1


def test_a_digest_never_names_an_item_the_owner_may_no_longer_read(
    smtp: Inbox, reader: Any, pricing: dict[str, Any]
) -> None:
    services.follow_digest_set(owner=reader, enabled=True)
    follow = services.follow_create(owner=reader, query="pricing policy")
    fresh = publish("Pricing policy for frameworks", "The pricing policy for frameworks.")
    services.follow_run(follow_id=follow.pk)
    ContentItem.objects.filter(pk=fresh.pk).update(visibility="staff")

    assert services.follows_digest_send() == 0 and smtp.messages == []


def test_a_failed_send_is_retried_by_the_next_run(
    smtp: Inbox, reader: Any, pricing: dict[str, Any], settings: Any
) -> None:
    services.follow_digest_set(owner=reader, enabled=True)
    services.follow_create(owner=reader, query="pricing policy")
    publish("Pricing policy for frameworks", "The pricing policy for frameworks.")

    # when the SMTP server cannot be reached
    port = settings.EMAIL_PORT
    settings.EMAIL_PORT = free_port()
    assert services.follows_run_all().digests == 0
    assert FollowItem.objects.filter(emailed_at__isnull=True).count() == 1

    # then the next run, with the server back, sends it
    settings.EMAIL_PORT = port
    assert services.follows_run_all().digests == 1 and len(smtp.messages) == 1
    assert not FollowItem.objects.filter(emailed_at__isnull=True).exists()
