"""A REST API (Django REST framework) for what admin does, for automation: the registry's switches
and overrides of what code registers, prompts and resources defined as rows,
sessions, background calls and the audit trail (``audit``). A project mounts
``mcp_server.api.urls`` (the demo at ``/api/mcp/``).

``permissions`` (Django model permissions), ``validation`` (the checks admin forms make, as field
errors), ``registered`` (what code registers, with its settings), ``serializers`` (rows), ``views``,
``urls`` (the router and the OpenAPI schema).
"""
