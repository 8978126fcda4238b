"""Your Django code as MCP tools (docs/django_tools.md): the actions of Django REST framework
ViewSets (:func:`viewset_tools`), ``ModelAdmin`` actions (:func:`admin_action_tools`) and a
read-only, allowlisted query tool over models (:func:`model_query_tool` with a :class:`QueryPolicy`
each), whose free text comes back fenced as untrusted data (:class:`Fence`, :func:`unfence`).
"""

from .admin_actions import admin_action_tools
from .model_query import QueryPolicy, model_query_tool
from .untrusted import Fence, unfence
from .viewsets import viewset_tools

__all__ = ["Fence", "QueryPolicy", "admin_action_tools", "model_query_tool", "unfence", "viewset_tools"]
