"""A test-only Django app for the stdio tests: its ``mcp.py`` is autodiscovered like any app's."""
