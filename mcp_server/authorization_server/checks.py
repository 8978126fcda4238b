"""System checks of the authorization server app."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.template import TemplateDoesNotExist
from django.template.loader import get_template

from ..settings import mcp_settings
from .throttle import Rate

CONSENT_TEMPLATE = "oauth/consent.html"
RATES = ("REGISTRATION_RATE", "LOGIN_FAILURE_RATE", "CLIENT_SECRET_FAILURE_RATE")
BOUNDS = ("MAX_REDIRECT_URIS", "MAX_REDIRECT_URI_LENGTH", "MAX_REGISTRATION_BYTES")


@checks.register(checks.Tags.templates)
def check_consent_template(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The consent page's template ships with the app; a project may override it. Without any,
    every authorization request would fail, so start-up stops instead."""
    try:
        get_template(CONSENT_TEMPLATE)
    except TemplateDoesNotExist:
        return [checks.Error(
            f"The OAuth consent page's template {CONSENT_TEMPLATE!r} is not found.",
            hint='The app ships one: keep "mcp_server.authorization_server" in INSTALLED_APPS and '
                 "TEMPLATES' APP_DIRS True (as startproject writes it), or put your own "
                 f"{CONSENT_TEMPLATE} in a directory of TEMPLATES' DIRS.",
            id="mcp_authorization_server.E001",
        )]
    return []


@checks.register(checks.Tags.security)
def check_limits(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Limits that cannot be read stop start-up, rather than fail the first request they apply to."""
    conf = mcp_settings.AUTHORIZATION_SERVER
    errors = []
    for name in RATES:
        try:
            Rate.parse(conf[name], f"MCP_SERVER['AUTHORIZATION_SERVER'][{name!r}]")
        except ImproperlyConfigured as exc:
            errors.append(checks.Error(str(exc), id="mcp_authorization_server.E002"))
    for name in BOUNDS:
        value = conf[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            errors.append(checks.Error(
                f"MCP_SERVER['AUTHORIZATION_SERVER'][{name!r}] must be a positive integer, not {value!r}",
                id="mcp_authorization_server.E002"))
    return errors
