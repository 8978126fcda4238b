"""The client's transports: stdio (a subprocess) and Streamable HTTP (httpx)."""
