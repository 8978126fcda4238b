"""``WorkloadIdentityProvider``: a workload's platform-issued JWT as an RFC 7523 authorization grant
(workload identity federation, SEP-1933)."""

from __future__ import annotations

from typing import Any

from .cross_app import AssertionProvider, JWTBearerFlow


class WorkloadIdentityProvider(JWTBearerFlow):
    """``WorkloadIdentityProvider(assertion_provider=, client_id=None)``:
    ``assertion_provider(audience=<AS issuer>, resource=<MCP server>)`` returns the workload's JWT
    (read the file the platform rotates, ask its metadata service...), sent as
    ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`` with ``assertion``; the client id, if
    any, goes in the body (no client secret). A refused grant raises ``TokenError``: it is not
    retried, nor another grant type tried."""

    def __init__(self, *, assertion_provider: AssertionProvider, client_id: str | None = None,
                 **options: Any):
        super().__init__(assertion_provider=assertion_provider, **options)
        self.client_id = client_id

    def _grant_client(self) -> dict | None:
        return {"client_id": self.client_id} if self.client_id else None
