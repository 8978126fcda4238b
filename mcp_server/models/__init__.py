"""The app's models: sessions and their stored events (``sessions``), background calls (``calls``),
the registry as administrators shape it (``registry``), and the audit trail (``audit``)."""

from .audit import AppendOnlyError, AuditRecord
from .calls import ToolCall
from .registry import PrimitiveSetting, StoredPrompt, StoredResource, StoredResourceTemplate, StoredSkill
from .sessions import CompactJSONEncoder, ResourceSubscription, Session, StreamEvent

__all__ = ["AppendOnlyError", "AuditRecord", "CompactJSONEncoder", "PrimitiveSetting", "ResourceSubscription",
           "Session", "StoredPrompt", "StoredResource", "StoredResourceTemplate", "StoredSkill",
           "StreamEvent", "ToolCall"]
