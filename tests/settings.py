"""Settings of the test suite: the demo project, on a development machine.

``DJANGO_DEVELOPMENT=1`` lets the demo's settings use their insecure development key when
``DJANGO_SECRET_KEY`` is not set; it is set in the environment, so the processes the tests start
(daphne, stdio servers, management commands) inherit it.
"""

import os

os.environ.setdefault("DJANGO_DEVELOPMENT", "1")

from project.settings import *  # noqa: F403
