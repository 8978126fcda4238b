"""Your Django code as tools: ``ModelAdmin`` actions (:func:`admin_action_tools`) and a read-only,
allowlisted query tool over models (:func:`model_query_tool` with a :class:`QueryPolicy` each).

See docs/django_tools.md.
"""

from .admin_actions import admin_action_tools
from .model_query import QueryPolicy, model_query_tool
from .untrusted import Fence, unfence

__all__ = ["Fence", "QueryPolicy", "admin_action_tools", "model_query_tool", "unfence"]
