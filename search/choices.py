"""The vocabularies of the knowledge base's fields (visibility, content type, review status).

Their own module so the query sets (``search.managers``) and the engine can name them without importing the
models that use those query sets.
"""

from django.db import models


class Visibility(models.TextChoices):
    PUBLIC = "public", "Public"
    SIGNED_IN = "signed_in", "Signed-in users"
    STAFF = "staff", "Staff only"
    GROUPS = "groups", "Selected groups"


class ContentType(models.TextChoices):
    GUIDE = "guide", "Guide"
    POLICY = "policy", "Policy"
    CASE_STUDY = "case_study", "Case study"
    TEMPLATE = "template", "Template"
    QA = "qa", "Q&A"
    CHECKLIST = "checklist", "Checklist"
    ARTICLE = "article", "Article"


class ReviewStatus(models.TextChoices):
    OK = "ok", "Up to date"
    DUE_SOON = "due_soon", "Due soon"
    OVERDUE = "review_overdue", "Review overdue"
