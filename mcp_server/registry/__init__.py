"""The registry as administrators shape it: ``overlay`` (what each request sees), ``access``
(restrictions and users' grants), ``stored`` (primitives from admin rows), ``placeholders``
(``{name}`` in admin-written texts), ``changes`` (a save reaches every process)."""
