"""The rate-limit middleware's token buckets in Redis, shared by every process.

One Lua script takes a token from each bucket of a call, all or none: Redis runs a script alone,
so two processes can never both take the last token. Time is Redis's own clock (``TIME``), so the
machines' clocks need not agree. A bucket is a hash (tokens, when) that expires once it would be
full again.
"""

from __future__ import annotations

from typing import Any

from .redis_client import Script

# KEYS: the buckets. ARGV: capacity and period (seconds) of each, in turn. Returns the seconds to
# wait as a string (0 when taken): a Lua number would reach the client truncated to an integer.
_TAKE = Script("""
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local levels, wait = {}, 0
for i, key in ipairs(KEYS) do
  local capacity, period = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local rate = capacity / period
  local state = redis.call('HMGET', key, 'tokens', 'at')
  local tokens, at = tonumber(state[1]), tonumber(state[2])
  if tokens == nil or at == nil then tokens, at = capacity, now end
  tokens = math.min(capacity, tokens + math.max(0, now - at) * rate)
  levels[i] = tokens
  if tokens < 1 then wait = math.max(wait, (1 - tokens) / rate) end
end
for i, key in ipairs(KEYS) do
  local period = tonumber(ARGV[2 * i])
  local tokens = levels[i]
  if wait == 0 then tokens = tokens - 1 end
  redis.call('HSET', key, 'tokens', tostring(tokens), 'at', tostring(now))
  redis.call('PEXPIRE', key, math.ceil(period * 1000) + 1000)
end
return tostring(wait)
""")


class RedisBuckets:
    """``ports.TokenBuckets`` in Redis; ``clients.get()`` gives a connection (as the stores')."""

    def __init__(self, clients: Any, prefix: str = "mcp:rate:"):
        self.clients = clients
        self.prefix = prefix

    async def take(self, buckets: list[tuple[str, int, float]]) -> float:
        keys = [self.prefix + key for key, _capacity, _period in buckets]
        args: list[Any] = []
        for _key, capacity, period in buckets:
            args += [capacity, period]
        reply = await self.clients.get().run_script(_TAKE, keys, args)
        return float(reply.decode() if isinstance(reply, bytes) else reply)
