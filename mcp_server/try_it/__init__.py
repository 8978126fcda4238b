""""Try it" in admin: a form built from a tool's input schema (``forms``), a run of the tool as the
logged-in user through the server's own dispatch (``runner``), and the page that streams its
progress, log messages and result (``views``)."""
