"""The eight syslog severities of ``notifications/message``, least severe first (both sides)."""

LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
