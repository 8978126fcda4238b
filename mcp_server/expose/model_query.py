"""A read-only query tool over chosen models, within an allowlist:
``model_query_tool({Ticket: QueryPolicy(fields=[...], filter_fields={...})}, name="query_records")``.

Every field, lookup, ordering and aggregate a call names is checked against the model's
:class:`QueryPolicy` before a ``Q`` object is built; the tool never runs SQL of its own making and
never evaluates anything. It reads for the Django user behind the request, who needs the model's
``view`` permission, at most ``QUERY_MAX_ROWS`` rows and ``QUERY_MAX_BYTES`` bytes a call and the
session's budget (``QUERY_SESSION_MAX_ROWS``, ``QUERY_SESSION_MAX_BYTES``), from the
``QUERY_DATABASE`` alias, stopped by PostgreSQL at ``QUERY_STATEMENT_TIMEOUT``. Free text in
the result is fenced as untrusted data (:mod:`mcp_server.expose.untrusted`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_permission_codename
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, models, router
from django.db.models import Avg, Count, Max, Min, Q, Sum

from ..errors import invalid_params
from ..primitives.tool import Tool
from ..settings import mcp_settings
from . import model_fields, query_results
from .query_budget import SessionBudget, budget_key
from .query_execution import check_timeout_backend, read_only
from .refusals import Refused, refusal, user_of

__all__ = ["QueryPolicy", "model_query_tool"]

AGGREGATES = {"count": Count, "sum": Sum, "avg": Avg, "min": Min, "max": Max}
TEXT_LOOKUPS = {"iexact", "contains", "icontains", "startswith", "istartswith", "endswith",
                "iendswith"}
SCALAR_LOOKUPS = {"exact", "gt", "gte", "lt", "lte"} | TEXT_LOOKUPS
LOOKUPS = SCALAR_LOOKUPS | {"in", "isnull", "range"}
# The most values one "in" lookup may list.
MAX_IN_VALUES = 1000


@dataclass(frozen=True)
class QueryPolicy:
    """What the query tool may read of one model.

    ``fields``: the fields a call may return (all of them by default); a path such as
    ``"owner__username"`` follows a forward foreign key only when listed here.
    ``filter_fields``: field path -> the lookups allowed on it (``exact``, ``iexact``,
    ``contains``, ``icontains``, ``startswith``, ``istartswith``, ``endswith``, ``iendswith``,
    ``gt``, ``gte``, ``lt``, ``lte``, ``in``, ``isnull``, ``range``).
    ``ordering``: the fields a call may order by (ascending or descending).
    ``aggregates``: the functions a call may compute: ``count``, and ``sum``, ``avg``, ``min``,
    ``max`` of the numeric fields among ``fields``; ``group_by``: the fields they may be grouped by.
    ``untrusted_fields``: the fields whose text is fenced as untrusted data; None: every
    ``TextField``, and every ``CharField`` without choices, among ``fields`` and ``group_by``.
    """

    fields: Sequence[str]
    filter_fields: Mapping[str, Sequence[str]] = field(default_factory=dict)
    ordering: Sequence[str] = ()
    aggregates: Sequence[str] = ()
    group_by: Sequence[str] = ()
    untrusted_fields: Sequence[str] | None = None


class _Bound:
    """A policy checked against its model."""

    def __init__(self, model: type[models.Model], policy: QueryPolicy) -> None:
        self.model = model
        self.label = model_fields.label(model)
        where = f"QueryPolicy of {self.label}"
        self.fields = self._paths(policy.fields, f"{where}: fields")
        if not self.fields:
            raise ValueError(f"{where}: name at least one field")
        self.filters: dict[str, tuple[models.Field, frozenset[str]]] = {}
        for path, lookups in dict(policy.filter_fields).items():
            (field_,) = self._paths([path], f"{where}: filter_fields").values()
            if isinstance(lookups, str) or not lookups:
                raise ValueError(f"{where}: filter_fields[{path!r}] is a list of lookups")
            for lookup in lookups:
                if lookup not in LOOKUPS or field_.get_lookup(lookup) is None:
                    raise ValueError(f"{where}: {lookup!r} is not a lookup offered on {path!r}; the "
                                     f"offered ones are {', '.join(sorted(LOOKUPS))}")
                if lookup in TEXT_LOOKUPS and model_fields.kind(field_) not in model_fields.TEXT_TYPES:
                    raise ValueError(f"{where}: {lookup!r} applies to text, and {path!r} is not text")
            self.filters[path] = (field_, frozenset(lookups))
        self.ordering = self._paths(policy.ordering, f"{where}: ordering")
        unknown = set(policy.aggregates) - set(AGGREGATES)
        if unknown or isinstance(policy.aggregates, str):
            raise ValueError(f"{where}: aggregates are among {', '.join(AGGREGATES)}, not {unknown}")
        self.aggregates = frozenset(policy.aggregates)
        # Numbers to add up or average: not keys, whose sum means nothing.
        self.numeric = {path: f for path, f in self.fields.items()
                        if not f.is_relation and not f.primary_key
                        and model_fields.kind(f) in model_fields.NUMERIC_TYPES}
        self.group_by = self._paths(policy.group_by, f"{where}: group_by")
        if self.group_by and not self.aggregates:
            raise ValueError(f"{where}: group_by needs aggregates to compute")
        readable = {**self.fields, **self.group_by}
        if policy.untrusted_fields is None:
            self.untrusted = {path for path, f in readable.items() if model_fields.is_free_text(f)}
        else:
            self.untrusted = set(self._paths(policy.untrusted_fields, f"{where}: untrusted_fields"))
        self.view_permission = f"{model._meta.app_label}.{get_permission_codename('view', model._meta)}"

    def _paths(self, paths: Sequence[str], where: str) -> dict[str, models.Field]:
        if isinstance(paths, str):
            raise ValueError(f"{where} is a list of field names, not a string")
        resolved = {}
        for path in paths:
            try:
                resolved[path] = model_fields.resolve(self.model, path)
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
        return resolved


def model_query_tool(policies: Mapping[type[models.Model], QueryPolicy], *,
                     name: str = "query_records", title: str | None = None,
                     description: str | None = None, using: str | None = None,
                     statement_timeout: float | None = None) -> Tool:
    """One read-only tool over the models of ``policies``.

    ``using``: the database alias to read from (a replica); None: ``QUERY_DATABASE``, else the
    router's ``db_for_read``. ``statement_timeout``: seconds a query may run on PostgreSQL; None:
    ``QUERY_STATEMENT_TIMEOUT``. Either refused at once where it cannot hold.
    """
    if not policies:
        raise ValueError("model_query_tool needs at least one model and its QueryPolicy")
    bound = {}
    for model, policy in policies.items():
        if not isinstance(policy, QueryPolicy):
            raise ValueError(f"the policy of {model!r} must be a QueryPolicy, not {policy!r}")
        entry = _Bound(model, policy)
        bound[entry.label] = entry
    if using is not None and using not in connections:
        raise ImproperlyConfigured(f"the query tool reads from the database {using!r}, which "
                                   "DATABASES does not define")
    if statement_timeout is not None:
        query_results.check_seconds(statement_timeout, "statement_timeout")
        if using is not None:
            check_timeout_backend(using)
    runner = _QueryRunner(bound, using, statement_timeout)
    return Tool.define(
        runner, name=name, title=title or "Query records",
        description=description or query_results.describe(bound),
        input_schema=query_results.input_schema(bound),
        annotations={"read_only_hint": True, "destructive_hint": False, "idempotent_hint": True,
                     "open_world_hint": False},
    )


class _QueryRunner:
    def __init__(self, bound: dict[str, _Bound], using: str | None,
                 statement_timeout: float | None) -> None:
        self.bound, self.using, self.statement_timeout = bound, using, statement_timeout

    def __call__(self, arguments: dict, server_context: Any = None) -> Any:
        plan = _Plan(self.bound, arguments)  # -32602 for anything outside the allowlist
        try:
            user = user_of(server_context)
            if not user.has_perm(plan.policy.view_permission):
                raise Refused(f"{user.get_username()!r} may not view {plan.policy.label} "
                              f"(the {plan.policy.view_permission!r} permission is needed).")
            budget = SessionBudget(budget_key(server_context))
            rows_left, bytes_left = budget.remaining()
            if rows_left == 0 or bytes_left == 0:
                spent = "rows" if rows_left == 0 else "bytes"
                raise Refused(f"This session has read all the {spent} the query tool allows a "
                              f"session (QUERY_SESSION_MAX_{spent.upper()}); nothing more can be "
                              "read in it.")
            alias = self.using or mcp_settings.QUERY_DATABASE or router.db_for_read(plan.policy.model)
            timeout = self.statement_timeout if self.statement_timeout is not None \
                else mcp_settings.QUERY_STATEMENT_TIMEOUT
            limits = query_results.Limits.for_call(plan.limit, rows_left, bytes_left)
            with read_only(alias, timeout):
                fetched = plan.fetch(alias, limits.rows + 1)
            result = query_results.build(plan.policy, fetched, plan.offset, limits,
                                         aggregated=plan.aggregated)
            # A call the session's bytes cut spends them all: the row that did not fit would not
            # fit the next call either, which is refused rather than cut to nothing again.
            spent = bytes_left if result.cut_by == "QUERY_SESSION_MAX_BYTES" else result.size
            budget.spend(result.rows, spent)
            return result.response
        except Refused as exc:
            return refusal(exc)


def _bad(message: str, **data: Any) -> Exception:
    return invalid_params(f"Invalid params: {message}", data=data or None)


class _Plan:
    """A call's arguments, each checked against the policy: what to read, and how."""

    def __init__(self, bound: dict[str, _Bound], arguments: dict) -> None:
        label = arguments.get("model")
        if label is None and len(bound) == 1:
            label = next(iter(bound))
        if label not in bound:
            raise _bad(f"'model' must be one of {', '.join(bound)}, not {label!r}", model=label)
        self.policy = policy = bound[label]
        self.query = self._filters(arguments.get("filters") or {})
        self.limit = self._count(arguments, "limit", minimum=1)
        self.offset = self._count(arguments, "offset", minimum=0) or 0
        group_by = self._names(arguments, "group_by", policy.group_by)
        self.aggregates = self._aggregates(arguments.get("aggregates"))
        if group_by and not self.aggregates:
            raise _bad("'group_by' needs 'aggregates'")
        self.aggregated = bool(self.aggregates)
        self.group_by = group_by
        if self.aggregated:
            if "fields" in arguments:
                raise _bad("'fields' does not go with 'aggregates' (the rows are groups)")
            self.fields = group_by
            orderable = {*group_by, *self.aggregates}
        else:
            self.fields = self._names(arguments, "fields", policy.fields) or list(policy.fields)
            orderable = set(policy.ordering)
        self.ordering = []
        for item in self._list(arguments, "ordering"):
            path = item[1:] if isinstance(item, str) and item.startswith("-") else item
            if path not in orderable:
                raise _bad(f"cannot order by {item!r}; allowed: {', '.join(sorted(orderable)) or 'none'} "
                           "(prefix '-' for descending)", field=item)
            self.ordering.append(item)

    def _filters(self, filters: Any) -> Q:
        if not isinstance(filters, dict):
            raise _bad("'filters' is an object of 'field' or 'field__lookup' keys")
        query = Q()
        for key, value in filters.items():
            path, lookup = self._split(key)
            field_ = self.policy.filters[path][0]
            where = f"filters.{key}"
            try:
                if lookup == "isnull":
                    if not isinstance(value, bool):
                        raise ValueError(f"{where}: isnull takes true or false")
                    parsed: Any = value
                elif lookup in ("in", "range"):
                    size = (1, MAX_IN_VALUES) if lookup == "in" else (2, 2)
                    if not isinstance(value, list) or not size[0] <= len(value) <= size[1]:
                        raise ValueError(f"{where}: {lookup} takes a list of {size[0]} to "
                                         f"{size[1]} values" if size[0] != size[1] else
                                         f"{where}: range takes a list of two values")
                    parsed = [model_fields.parse(field_, item, where) for item in value]
                elif lookup in TEXT_LOOKUPS:
                    if not isinstance(value, str):
                        raise ValueError(f"{where}: {lookup} takes a string")
                    parsed = value
                else:
                    parsed = model_fields.parse(field_, value, where)
                    if parsed is None:
                        raise ValueError(f"{where}: use {path}__isnull to match null")
            except ValueError as exc:
                raise _bad(str(exc), field=key) from None
            query &= Q(**{f"{path}__{lookup}": parsed})
        return query

    def _split(self, key: Any) -> tuple[str, str]:
        """``key`` as (allowed path, allowed lookup), or -32602 naming it."""
        filters = self.policy.filters
        if isinstance(key, str):
            if key in filters and "exact" in filters[key][1]:
                return key, "exact"
            path, _, lookup = key.rpartition("__")
            if path in filters and lookup in filters[path][1]:
                return path, lookup
        offered = sorted(path if lookup == "exact" else f"{path}__{lookup}"
                         for path, (_, lookups) in filters.items() for lookup in lookups)
        raise _bad(f"{key!r} is not a filter offered on {self.policy.label}; the filters are "
                   f"{', '.join(offered) or 'none'}", field=key)

    def _aggregates(self, given: Any) -> dict[str, Any]:
        if given is None:
            return {}
        if not isinstance(given, list) or not given:
            raise _bad("'aggregates' is a non-empty list of {function, field} objects")
        computed: dict[str, Any] = {}
        for item in given:
            if not isinstance(item, dict) or set(item) - {"function", "field"}:
                raise _bad(f"an aggregate is an object with 'function' and 'field', not {item!r}")
            function, path = item.get("function"), item.get("field")
            if function not in self.policy.aggregates:
                raise _bad(f"aggregate {function!r} is not offered on {self.policy.label}; the "
                           f"offered ones are {', '.join(sorted(self.policy.aggregates)) or 'none'}",
                           field=function)
            if path is None:
                if function != "count":
                    raise _bad(f"aggregate {function!r} needs a 'field'")
                computed["count"] = Count("pk")
                continue
            allowed = self.policy.fields if function == "count" else self.policy.numeric
            if path not in allowed:
                raise _bad(f"{function} of {path!r} is not offered; the fields it takes are "
                           f"{', '.join(sorted(allowed)) or 'none'}", field=path)
            computed[f"{function}_{path}"] = AGGREGATES[function](path)
        return computed

    def _names(self, arguments: dict, key: str, allowed: Mapping[str, Any]) -> list[str]:
        names = self._list(arguments, key)
        for name in names:
            if name not in allowed:
                raise _bad(f"{key}: {name!r} is not offered on {self.policy.label}; the offered ones "
                           f"are {', '.join(allowed) or 'none'}", field=name)
        return names

    @staticmethod
    def _list(arguments: dict, key: str) -> list[str]:
        value = arguments.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise _bad(f"{key!r} is a list of field names")
        return value

    @staticmethod
    def _count(arguments: dict, key: str, *, minimum: int) -> int | None:
        value = arguments.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < minimum):
            raise _bad(f"{key!r} is an integer, {minimum} or more")
        return value

    def fetch(self, alias: str, count: int) -> list[dict[str, Any]]:
        """At most ``count`` rows (the ORM builds the SQL, from checked names only)."""
        queryset = self.policy.model._default_manager.using(alias).filter(self.query)
        if not self.aggregated:
            ordering = [*self.ordering, "pk"] if self.ordering or not queryset.ordered else []
            if ordering:
                queryset = queryset.order_by(*ordering)
            return list(queryset.values(*self.fields)[self.offset:self.offset + count])
        # Aggregates under aliases of our own: the output names ("count", "avg_priority") could
        # collide with a field of the model.
        aliases = {f"mcp_aggregate_{index}": (key, expression)
                   for index, (key, expression) in enumerate(self.aggregates.items())}
        expressions = {alias_: expression for alias_, (_, expression) in aliases.items()}
        renamed = {key: alias_ for alias_, (key, _) in aliases.items()}
        if not self.group_by:
            row = queryset.aggregate(**expressions)
            rows = [row] if self.offset == 0 else []
        else:
            order = [f"-{renamed[item[1:]]}" if item.startswith("-") and item[1:] in renamed
                     else renamed.get(item, item) for item in self.ordering] or list(self.group_by)
            grouped = queryset.values(*self.group_by).annotate(**expressions).order_by(*order)
            rows = list(grouped[self.offset:self.offset + count])
        return [{**{path: row[path] for path in self.group_by},
                 **{key: row[alias_] for alias_, (key, _) in aliases.items()}} for row in rows]
