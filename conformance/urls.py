"""No Django views: ``/mcp`` and ``/health`` are routed at the ASGI layer (``conformance/asgi.py``)."""

urlpatterns: list = []
