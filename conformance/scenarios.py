"""The client scenarios of the official conformance suite that ``conformance/client`` implements,
by suite: one list for conformance/run.py (which runs them) and conformance/client.py (which
answers them). Data only, standard library only."""

# The handshake-era client scenarios of 0.1.16 that need no OAuth.
HANDSHAKE = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]
# The auth/* scenarios both suites have: discovery variants, CIMD, scope selection and step-up,
# token endpoint authentication, pre-registration, the 2025-03-26 fallbacks, resource mismatch.
AUTH_BOTH = [
    "auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
    "auth/basic-cimd", "auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined", "auth/scope-step-up", "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
    "auth/pre-registration", "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback", "auth/resource-mismatch",
]
# The auth/* scenarios of 0.1.16.
AUTH_0_1 = [
    *AUTH_BOTH,
    "auth/offline-access-scope", "auth/offline-access-not-supported", "auth/client-credentials-jwt",
    "auth/client-credentials-basic", "auth/cross-app-access-complete-flow",
]
# The auth/* scenarios of the 0.2.0 alpha whose scenario server speaks the handshake era, and its
# issuer checks (RFC 9207, SEP-2468), and the DPoP extension's (RFC 9449); run by its 2025-11-25 leg.
AUTH_0_2 = [
    *AUTH_BOTH,
    "auth/iss-supported-missing", "auth/iss-wrong-issuer", "auth/iss-unexpected", "auth/iss-normalized",
    "auth/metadata-issuer-mismatch", "auth/client-credentials-jwt", "auth/client-credentials-basic",
    "auth/enterprise-managed-authorization", "auth/wif-jwt-bearer", "auth/dpop", "auth/dpop-nonce",
]
# The auth/* scenarios of the 0.2.0 alpha whose MCP server answers only the 2026-07-28 lifecycle.
AUTH_0_2_MODERN = [
    "auth/offline-access-scope", "auth/offline-access-not-supported", "auth/authorization-server-migration",
    "auth/iss-supported", "auth/iss-not-advertised",
]
# The 2026-07-28 client scenarios of the 0.2.0 alpha that need no OAuth.
MODERN = [
    "tools_call", "request-metadata", "sep-2322-client-request-state", "http-standard-headers",
    "http-custom-headers", "http-invalid-tool-headers", "json-schema-ref-no-deref",
    "json-schema-2020-12-preservation",
]
# Every auth/* scenario, whichever suite runs it.
AUTH = sorted(set(AUTH_0_1 + AUTH_0_2 + AUTH_0_2_MODERN))
