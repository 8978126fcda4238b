"""The app's models: sessions and their stored events (``sessions``), background calls (``calls``),
and the registry as administrators shape it (``registry``)."""

from .calls import ToolCall
from .registry import PrimitiveSetting, StoredPrompt, StoredResource, StoredResourceTemplate
from .sessions import CompactJSONEncoder, ResourceSubscription, Session, StreamEvent

__all__ = ["CompactJSONEncoder", "PrimitiveSetting", "ResourceSubscription", "Session", "StoredPrompt",
           "StoredResource", "StoredResourceTemplate", "StreamEvent", "ToolCall"]
