"""Who may use the API: authenticated users holding the Django model permission of what they touch,
and, for a change, not from another site's page in their browser."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.http import is_same_domain
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS, DjangoModelPermissions
from rest_framework.request import Request

CROSS_SITE = ("Forbidden: a change through the API may not come from another site's page "
              "(its Origin is not this site's); API clients send no Origin")

VIEW = "%(app_label)s.view_%(model_name)s"
CHANGE = "%(app_label)s.change_%(model_name)s"


class ModelPermissions(DjangoModelPermissions):
    """``DjangoModelPermissions``, with reading needing the model's view permission (as in admin)
    and an action of its own (``POST .../cancel/``) the change permission: it changes the row."""

    perms_map = {**DjangoModelPermissions.perms_map, "GET": [VIEW], "HEAD": [VIEW], "OPTIONS": [VIEW]}

    def has_permission(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        if request.method not in SAFE_METHODS and cross_site(request):
            raise PermissionDenied(CROSS_SITE)
        if getattr(view, "_ignore_model_permissions", False):
            return True
        method = "PATCH" if _is_extra_action(view) else request.method
        model = self._queryset(view).model
        return request.user.has_perms(self.get_required_permissions(method, model))


def _is_extra_action(view: Any) -> bool:
    action = getattr(view, "action", None)
    extra = getattr(view, "get_extra_actions", None)
    return action is not None and extra is not None and any(
        function.__name__ == action for function in extra())


def cross_site(request: Request) -> bool:
    """Whether a browser sent the request from a page of another site.

    A browser attaches the Basic credentials it cached for this site to any site's form posted
    here, and DRF checks CSRF only for session authentication: so a change is refused when the
    browser says where it comes from (``Sec-Fetch-Site``, ``Origin``) and that is not this site
    or one of ``CSRF_TRUSTED_ORIGINS``. A client that is no browser sends neither header.
    """
    fetch_site = request.META.get("HTTP_SEC_FETCH_SITE")
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return True
    origin = request.META.get("HTTP_ORIGIN")
    return origin is not None and not _trusted(request, origin)


def _trusted(request: Request, origin: str) -> bool:
    if origin == f"{request.scheme}://{request.get_host()}":
        return True
    for trusted in settings.CSRF_TRUSTED_ORIGINS:
        scheme, _, host = trusted.partition("://")
        if origin == trusted or (host.startswith("*.") and origin.startswith(f"{scheme}://")
                                 and is_same_domain(origin.partition("://")[2], host[1:])):
            return True
    return False
