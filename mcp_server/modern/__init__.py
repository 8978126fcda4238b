"""The 2026-07-28 lifecycle (SEP-2575) on the server: stateless requests that carry their client.

A modern request names its revision, client capabilities, client identity and log level in its
``_meta`` envelope, and is served by a :class:`ModernSession` built from that envelope alone: no
session row, no shared-state key, nothing kept once the response is written. The same method
table serves it as the handshake era; this package adds what differs (``server/discover``, the
methods the revision removed, ``resultType`` and cache hints on results, the stdio era lock).
"""
