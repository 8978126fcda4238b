"""Declared asks: what a handler needs from the client, as parameters (the markers).

A tool, prompt or resource handler names what it must ask before it can run::

    def confirmation(action: str) -> Elicit:
        return Elicit(f"Do you want to {action}?", CONFIRM_FORM)

    @mcp_server.tool
    def deploy(action: str, answer: Annotated[dict, Resolve(confirmation)]) -> str: ...

``Resolve(fn)`` fills the parameter with what ``fn`` returns; ``fn`` takes the handler's
arguments by name, ``server_context``, and other ``Annotated[..., Resolve(...)]`` parameters (so an
ask may depend on an earlier answer). When ``fn`` returns an ask (:class:`Elicit`,
:class:`ElicitURL`, :class:`Sample`, :class:`ListRoots`), the client's answer fills it instead. An
ask that depends on nothing may stand in the annotation itself: ``Annotated[dict, Elicit(...)]``.

``mcp_server.resolution`` does the asking, in either era; the handler's body runs once, after every
ask is answered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp_protocol.errors import USER_REJECTED, InvalidParamsError, MCPError

from .elicitation import check_action, check_form_answer
from .input_required import InputRequiredResult


class Resolve:
    """``Annotated[T, Resolve(fn)]``: the parameter is what ``fn`` returns, or, when ``fn``
    returns an ask, the client's answer to it."""

    # What primitives look for when they read a signature (they do not import this module).
    resolves_parameter = True

    def __init__(self, fn: Callable[..., Any]):
        if not callable(fn):
            raise TypeError(f"Resolve() needs a function, not {fn!r}")
        self.fn = fn

    def __repr__(self) -> str:
        return f"Resolve({getattr(self.fn, '__qualname__', self.fn)!r})"


@dataclass(frozen=True)
class ElicitationResult:
    """The full outcome of an elicitation: ``action`` is ``accept``, ``decline`` or ``cancel``;
    ``content`` is the accepted form's fields (None otherwise, and for URL mode).

    Annotate a parameter with it to receive a decline or cancel; with any other type, a decline
    or cancel ends the call instead (:class:`AskDeclinedError`).
    """

    action: str
    content: dict | None = None
    # The message of the elicitation answered (for the error of an unwanted decline).
    asked: str = field(default="", compare=False, repr=False)

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


class AskDeclinedError(MCPError):
    """The user declined (or cancelled) an elicitation whose parameter takes only an accepted
    answer. A tool call ends with an error result saying so; a prompt or resource read with
    this JSON-RPC error (code -1, the code of a user's rejection)."""

    code = USER_REJECTED

    def __init__(self, action: str, message: str):
        self.action = action
        self.asked = message
        verb = "declined" if action == "decline" else "cancelled"
        super().__init__(f"The user {verb} the request: {message}", data={"action": action})


class Ask:
    """What a resolver returns to ask the client (one of the subclasses)."""

    resolves_parameter = True

    def request(self) -> dict[str, Any]:
        """The embedded request: ``{"method", "params"}``, the same in both eras."""
        raise NotImplementedError

    def checked(self, answer: Any) -> Any:
        """The client's answer (to the batched request), refused with -32602 unless it fits."""
        if not isinstance(answer, dict):
            raise InvalidParamsError(f"Invalid params: the answer to {self!r} must be an object")
        return answer

    def outcome(self, answer: Any) -> Any:
        """What the parameter (or a dependent resolver) receives for a checked answer."""
        return answer


class Elicit(Ask):
    """A form elicitation: ``message`` and a flat ``schema`` (see
    :class:`~mcp_server.elicitation.EnumSchema`). The parameter receives the accepted form's
    fields (a dict), or the :class:`ElicitationResult` when annotated with it."""

    def __init__(self, message: str, schema: dict):
        self._request = InputRequiredResult.form_elicitation(message, schema)  # checks the schema
        self.message, self.schema = message, schema

    def request(self) -> dict[str, Any]:
        return self._request

    def checked(self, answer: Any) -> Any:
        return check_form_answer(answer, self.schema)

    def outcome(self, answer: Any) -> ElicitationResult:
        if answer["action"] != "accept":
            return ElicitationResult(answer["action"], asked=self.message)
        return ElicitationResult("accept", dict(answer.get("content") or {}), asked=self.message)

    def __repr__(self) -> str:
        return f"Elicit({self.message!r})"


class ElicitURL(Elicit):
    """A URL elicitation (SEP-1036): the user completes it out of band at ``url``. The parameter
    receives ``{}`` once the user accepted, or the :class:`ElicitationResult` when annotated with it."""

    def __init__(self, message: str, url: str, elicitation_id: str | None = None):
        self._request = InputRequiredResult.url_elicitation(message, url, elicitation_id)
        self.message, self.url = message, url

    def checked(self, answer: Any) -> Any:
        return check_action(answer)

    def __repr__(self) -> str:
        return f"ElicitURL({self.message!r}, {self.url!r})"


class Sample(Ask):
    """A sampling request (``sampling/createMessage``), with the arguments of
    :meth:`~mcp_server.ServerContext.create_sampling_message`; the parameter receives the
    client's result (``{"role", "content", "model", ...}``)."""

    def __init__(self, messages: list, max_tokens: int, **options: Any):
        self._request = InputRequiredResult.sampling(messages, max_tokens, **options)

    def request(self) -> dict[str, Any]:
        return self._request

    def checked(self, answer: Any) -> Any:
        answer = super().checked(answer)
        if "content" not in answer or "role" not in answer:
            raise InvalidParamsError("Invalid params: a sampling answer needs role and content")
        return answer


class ListRoots(Ask):
    """The client's roots (``roots/list``); the parameter receives the list of ``{"uri", "name"?}``."""

    def request(self) -> dict[str, Any]:
        return InputRequiredResult.list_roots()

    def checked(self, answer: Any) -> Any:
        answer = super().checked(answer)
        if not isinstance(answer.get("roots"), list):
            raise InvalidParamsError("Invalid params: a roots/list answer needs a roots list")
        return answer

    def outcome(self, answer: Any) -> list:
        return list(answer["roots"])

    def __repr__(self) -> str:
        return "ListRoots()"
