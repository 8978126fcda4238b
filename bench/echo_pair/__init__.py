"""The benchmark's pair of tools, ``echo_inline`` and ``echo_background``: one body, called in the
web process or on a Celery worker (``bench/run --only background``). Installed only by
``bench.settings``, so the demo does not list them."""
