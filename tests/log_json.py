"""The JSON formatter of docs/production.md ("Logging"), for the processes the tests start with
``MCP_TEST_LOG_IDS`` (tests/http_settings.py); test_log_context.py checks the page's copy."""

import json
import logging


class JSONFormatter(logging.Formatter):
    """One JSON object a line, with the ids of the MCP message being served."""

    FIELDS = ("mcp_request_id", "mcp_session_id", "mcp_trace_id", "mcp_method")

    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record), "level": record.levelname, "logger": record.name,
                 "process": record.process, "message": record.getMessage()}
        entry.update({name: getattr(record, name, None) for name in self.FIELDS})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)
