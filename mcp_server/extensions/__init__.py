from .mcp_apps import Apps
from .tasks import Tasks

__all__ = ["Apps", "Tasks"]
