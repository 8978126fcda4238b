"""The login page the consent page sends a visitor to, with wrong passwords counted.

Django's ``LoginView`` with a form that counts each wrong password per account and client
address (``LOGIN_FAILURE_RATE``, in Django's cache, which every process shares) and, past the
limit, refuses the account from that address (429) without checking the password, the right one
included, until the period ends. The app's URLs mount it at ``oauth/login/``; its template,
``mcp_authorization_server/login.html``, is the app's own, and a project overrides it by putting
one of that name in its templates.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.http import HttpResponse

from ..settings import mcp_settings
from ..telemetry import metrics
from .throttle import Rate, Throttle, client_address


def login_throttle() -> Throttle:
    rate = mcp_settings.AUTHORIZATION_SERVER["LOGIN_FAILURE_RATE"]
    return Throttle("logins", Rate.parse(rate, "MCP_SERVER['AUTHORIZATION_SERVER']['LOGIN_FAILURE_RATE']"))


class ThrottledAuthenticationForm(AuthenticationForm):
    """``AuthenticationForm`` whose wrong passwords count against the account from this address."""

    retry_after: int | None = None

    def clean(self) -> dict[str, Any]:
        username, password = self.cleaned_data.get("username"), self.cleaned_data.get("password")
        if username is None or not password:
            return super().clean()
        # Case-folded: a backend that matches usernames without case must not give each spelling
        # a budget of its own.
        key = (username.casefold(), client_address(self.request))
        throttle = login_throttle()
        self.retry_after = throttle.blocked(*key)
        if self.retry_after is not None:
            raise ValidationError(
                "Too many failed attempts to log in to this account from here; try again in "
                "%(minutes)d minute(s).", code="throttled",
                params={"minutes": max(1, round(self.retry_after / 60))})
        try:
            return super().clean()
        except ValidationError as exc:
            if exc.code == "invalid_login":
                throttle.record(*key)
            raise


class LoginView(auth_views.LoginView):
    template_name = "mcp_authorization_server/login.html"
    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form: ThrottledAuthenticationForm) -> HttpResponse:
        response = super().form_invalid(form)
        if form.retry_after is not None:
            metrics.refused("login_failure_rate", 429)
            response.status_code = 429
            response["Retry-After"] = str(form.retry_after)
        return response
