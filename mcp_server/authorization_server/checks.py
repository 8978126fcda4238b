"""System checks of the authorization server app."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.template import TemplateDoesNotExist
from django.template.loader import get_template

CONSENT_TEMPLATE = "oauth/consent.html"


@checks.register(checks.Tags.templates)
def check_consent_template(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The consent page's template is the project's own (its top-level templates/), as admin's
    look is: without it every authorization request would fail."""
    try:
        get_template(CONSENT_TEMPLATE)
    except TemplateDoesNotExist:
        return [checks.Error(
            f"The OAuth consent page's template {CONSENT_TEMPLATE!r} is not found.",
            hint="Copy templates/oauth/consent.html (and templates/registration/login.html for a login "
                 "page) from django-mcp-sdk's demo project into a directory of TEMPLATES' DIRS.",
            id="mcp_authorization_server.E001",
        )]
    return []
