"""Filling a handler's declared asks (``mcp_server.asks``) before its body runs, in either era.

Every round runs the resolvers again from the start; the handler's body runs once, when each of
its parameters has a value.

- On a 2026-07-28 request (or inside a task) the asks of a round go out together as one
  ``InputRequiredResult``. Its request state records the answers so far (each pinned to a digest
  of the question it answers) and the questions just asked; it is sealed on the wire, so the retry
  may land on any process. A resolver that needs an answer not given yet waits for a next round.
- On a handshake-era session each ask goes out live when its resolver returns it, tied to the
  request (progress, cancellation and timeouts as for ``create_form_elicitation``), and the
  resolvers run once.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import mrtr
from .asks import Ask, AskDeclinedError, ElicitationResult, Resolve
from .input_required import InputRequiredResult
from .invoke import call_user_code
from .outgoing import DeliveryError
from .request_state import arguments_digest

if TYPE_CHECKING:
    from .context import ServerContext

_STATE_VERSION = 1


@dataclass(frozen=True)
class _Resolver:
    """One resolver of a handler: its function (or a constant ask), how each of its parameters
    is filled, and the key of its ask on the wire (stable across processes)."""

    fn: Callable | None
    constant: Ask | None
    # (name, "context" | "argument" | "resolve", resolver, full)
    params: tuple[tuple[str, str, Any, bool], ...]
    key: str


@dataclass(frozen=True)
class Plan:
    """The asks of one handler: each declared parameter, its resolver, and whether it takes the
    full outcome (``ElicitationResult``) or only an accepted answer."""

    params: tuple[tuple[str, _Resolver, bool], ...]

    @property
    def names(self) -> frozenset[str]:
        return frozenset(name for name, _resolver, _full in self.params)

    async def resolve(self, ctx: ServerContext, arguments: dict) -> dict[str, Any] | InputRequiredResult:
        """The value of each declared parameter, or the input_required result of this round."""
        walk = _Round(ctx, arguments)
        values: dict[str, Any] = {}
        for name, resolver, full in self.params:
            try:
                outcome = await walk.resolve(resolver)
            except _Pending:
                continue
            values[name] = outcome if full else _accepted(outcome)
        if walk.pending:
            state = {"v": _STATE_VERSION, "answers": walk.kept,
                     "asked": {key: _digest(entry) for key, entry in walk.pending.items()}}
            return InputRequiredResult(walk.pending, request_state=json.dumps(state, separators=(",", ":")))
        return values


@functools.lru_cache(maxsize=4096)
def plan_of(handler: Callable) -> Plan | None:
    """The asks ``handler`` declares (None: none), read once from its signature."""
    function = inspect.unwrap(handler)
    declared = _declared(function)
    if not declared:
        return None
    resolvers: dict[Any, _Resolver] = {}
    names: dict[str, int] = {}
    params = tuple((name, _resolver_of(marker, name, resolvers, names, ()), full)
                   for name, (marker, full) in declared.items())
    return Plan(params)


async def call(ctx: ServerContext, plan: Plan | None, arguments: dict, handler: Callable, /,
               *args: Any, **kwargs: Any) -> Any:
    """Call ``handler`` once its asks are answered; this round's ``InputRequiredResult`` until then."""
    if plan is not None:
        values = await plan.resolve(ctx, arguments)
        if isinstance(values, InputRequiredResult):
            return values
        kwargs.update(values)
    value = await call_user_code(handler, *args, **kwargs)
    if plan is not None and isinstance(value, InputRequiredResult):
        # One request state per call: a handler's own rounds would overwrite its asks' answers.
        raise TypeError(f"{getattr(handler, '__qualname__', handler)} declares asks and returned an "
                        "InputRequiredResult too: declare every ask as a parameter instead")
    return value


# Reading signatures -------------------------------------------------------------------------------
def _hints(function: Callable) -> dict[str, Any]:
    target = function if inspect.isroutine(function) else type(function).__call__
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception:
        # Annotations that do not evaluate (names imported for type checking only) declare
        # nothing this can read; a marker among them would be lost, so that is refused.
        raw = getattr(target, "__annotations__", {}) or {}
        if any(isinstance(a, str) and ("Resolve(" in a or "Elicit" in a) for a in raw.values()):
            raise
        return {}


def _declared(function: Callable) -> dict[str, tuple[Any, bool]]:
    """``{parameter: (marker, full)}`` for each ``Annotated[T, Resolve(...)]`` (or ask) parameter."""
    hints = _hints(function)
    declared = {}
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return {}
    for name in parameters:
        annotation = hints.get(name)
        if typing.get_origin(annotation) is not typing.Annotated:
            continue
        kind, *metadata = typing.get_args(annotation)
        marker = next((m for m in metadata if isinstance(m, Resolve | Ask)), None)
        if marker is not None:
            declared[name] = (marker, _is_full(kind))
    return declared


def _is_full(kind: Any) -> bool:
    members = typing.get_args(kind) if typing.get_origin(kind) is not None else (kind,)
    return any(isinstance(m, type) and issubclass(m, ElicitationResult) for m in members)


def _resolver_of(marker: Resolve | Ask, parameter: str, resolvers: dict, names: dict[str, int],
                 stack: tuple) -> _Resolver:
    identity = id(marker) if isinstance(marker, Ask) else _identity(marker.fn)
    if identity in stack:
        raise TypeError(f"the resolver {marker!r} depends on itself")
    if identity in resolvers:
        return resolvers[identity]
    if isinstance(marker, Ask):
        resolver = _Resolver(None, marker, (), _unique(parameter, names))
        resolvers[identity] = resolver
        return resolver
    fn = marker.fn
    params = []
    for name, (inner, full) in _declared(fn).items():
        inner_resolver = _resolver_of(inner, name, resolvers, names, (*stack, identity))
        params.append((name, "resolve", inner_resolver, full))
    declared = {p[0] for p in params}
    for name, parameter in inspect.signature(fn).parameters.items():
        if name in declared or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        params.append((name, "context" if name == "server_context" else "argument", None, False))
    base = getattr(fn, "__name__", None) or type(fn).__name__
    resolver = _Resolver(fn, None, tuple(params), _unique(base, names))
    resolvers[identity] = resolver
    return resolver


def _identity(fn: Callable) -> Any:
    # A bound method is a new object at each access: its function and instance name it.
    owner = getattr(fn, "__self__", None)
    return (id(getattr(fn, "__func__", fn)), id(owner)) if owner is not None else id(fn)


def _unique(base: str, names: dict[str, int]) -> str:
    count = names.get(base, 0)
    names[base] = count + 1
    return base if count == 0 else f"{base}#{count}"


# One round ----------------------------------------------------------------------------------------
class _Pending(Exception):
    """A resolver needs an answer this round cannot give yet."""


class _Round:
    def __init__(self, ctx: ServerContext, arguments: dict):
        self.ctx, self.arguments = ctx, arguments
        self.batched = ctx.session.is_modern or getattr(ctx, "task_input", None) is not None
        state = _opened(ctx.request_state) if self.batched else {}
        self.recorded: dict[str, dict] = state.get("answers", {})
        self.asked: dict[str, str] = state.get("asked", {})
        self.answers = (ctx.input_responses or {}) if self.batched else {}
        self.outcomes: dict[str, Any] = {}
        self.pending: dict[str, dict] = {}
        self.kept: dict[str, dict] = {}  # the answers the next round's state carries

    async def resolve(self, resolver: _Resolver) -> Any:
        if resolver.key in self.outcomes:
            return self.outcomes[resolver.key]
        if resolver.key in self.pending:
            raise _Pending
        if resolver.constant is not None:
            value: Any = resolver.constant
        else:
            kwargs, waiting = {}, False
            for name, kind, inner, full in resolver.params:
                if kind == "context":
                    kwargs[name] = self.ctx
                elif kind == "argument":
                    if name in self.arguments:
                        kwargs[name] = self.arguments[name]
                else:
                    try:  # every dependency, so that independent asks go out in the same round
                        outcome = await self.resolve(inner)
                    except _Pending:
                        waiting = True
                        continue
                    kwargs[name] = outcome if full else _accepted(outcome)
            if waiting:
                raise _Pending
            value = await call_user_code(resolver.fn, **kwargs)
        outcome = await self._ask(resolver.key, value) if isinstance(value, Ask) else value
        self.outcomes[resolver.key] = outcome
        return outcome

    async def _ask(self, key: str, ask: Ask) -> Any:
        entry = ask.request()
        if not self.batched:
            refused = self.ctx.session.requests_refused
            if refused:  # the error create_form_elicitation() and the others give there
                raise DeliveryError(f"{entry['method']}: {refused}")
            answers = await mrtr.fulfil_live(self.ctx, InputRequiredResult({key: entry}))
            return ask.outcome(ask.checked(answers[key]))
        question = _digest(entry)
        recorded = self.recorded.get(key)
        if recorded is not None and recorded.get("q") == question:
            self.kept[key] = recorded
            return ask.outcome(recorded["a"])
        answer = self.answers.get(key)
        # An answer counts for the very question asked (a question reworded since is asked again).
        if answer is not None and self.asked.get(key) == question:
            answer = ask.checked(answer)
            self.kept[key] = {"q": question, "a": answer}
            return ask.outcome(answer)
        self.pending[key] = entry
        raise _Pending


def _accepted(outcome: Any) -> Any:
    """The value of a parameter that takes only an accepted answer."""
    if not isinstance(outcome, ElicitationResult):
        return outcome
    if outcome.accepted:
        return outcome.content
    raise AskDeclinedError(outcome.action, outcome.asked)


def _digest(entry: dict) -> str:
    return arguments_digest(entry)[:22]


def _opened(request_state: str | None) -> dict:
    """The answers so far, from this module's own (already authenticated) state; none when the
    state is not one (a state from another release, say): the questions are asked again."""
    if not request_state:
        return {}
    try:
        state = json.loads(request_state)
    except ValueError:
        return {}
    ok = isinstance(state, dict) and state.get("v") == _STATE_VERSION \
        and isinstance(state.get("answers"), dict) and isinstance(state.get("asked"), dict)
    return state if ok else {}

