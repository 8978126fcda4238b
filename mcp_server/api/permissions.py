"""Who may use the API: authenticated users holding the Django model permission of what they touch."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import DjangoModelPermissions
from rest_framework.request import Request

VIEW = "%(app_label)s.view_%(model_name)s"
CHANGE = "%(app_label)s.change_%(model_name)s"


class ModelPermissions(DjangoModelPermissions):
    """``DjangoModelPermissions``, with reading needing the model's view permission (as in admin)
    and an action of its own (``POST .../cancel/``) the change permission: it changes the row."""

    perms_map = {**DjangoModelPermissions.perms_map, "GET": [VIEW], "HEAD": [VIEW], "OPTIONS": [VIEW]}

    def has_permission(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
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
