"""Settings of the servers of ``bench/run --only background``: the demo project's, plus the app
holding the benchmark's pair of tools (``bench/echo_pair``), so the demo itself stays as it is."""

from project.settings import *  # noqa: F403
from project.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "bench.echo_pair"]
