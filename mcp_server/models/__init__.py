"""The app's models: sessions and their stored events (``sessions``), background calls (``calls``)."""

from .calls import ToolCall
from .sessions import CompactJSONEncoder, ResourceSubscription, Session, StreamEvent

__all__ = ["CompactJSONEncoder", "ResourceSubscription", "Session", "StreamEvent", "ToolCall"]
