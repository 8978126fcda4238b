"""Background tool calls: tools marked ``background=True`` run in a Celery worker (or, on the
embedded default, in the web process), each with a ``ToolCall`` record in the database.

``records`` writes the record; ``launch`` is the web process's side of a call, ``worker`` the
Celery worker's, ``execute`` what both run; ``runner`` says which runner is configured.
"""
