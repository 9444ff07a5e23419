"""The shared machinery of every authentication flow.

Rules / theory of operation
---------------------------
A flow is a class with a ``State`` enum and ONE transition table, ``TABLE``, written at the
top of its module::

    TABLE: Table[State] = {
        (State.START, LoginRequested): edge("_on_request", State.LOADING_USER, State.FAILED),
        ...
    }

A key is ``(state, event type)``; its value names the handler method and lists every state
the handler may move to. Handlers are named rather than referenced because the table comes
before the class that defines them; a subclass whose table names a missing method, or a
state of another enum, fails at import. Several targets per entry (rather than one) let a
single result event branch, e.g. "user created" -> send a verification link or issue
tokens, while the table still lists every possible move (and the diagrams draw them all).
``handle(event)``:

1. looks the pair up; a missing pair is a driver bug: the machine moves to ``ERROR`` and
   raises :class:`LocalFlowError` (h11's "illegal transition is loud and terminal");
2. calls the handler, which returns ``(effects, next_state)``; ``next_state`` must be one of
   the listed targets, and a flow that ends in a :class:`Fail`
   effect must land in ``FAILED`` (checked here, so the table cannot lie);
3. returns the effects. Only the LAST effect of a batch may await a reply (its ``replies``
   names the events the driver answers with); the others are fire-and-forget and the driver
   runs them in order, stopping at the first exception.

Every state enum has ``START``, ``DONE``, ``FAILED`` and ``ERROR``. ``FAILED`` is a refused
request (the caller gets the error in ``Fail``); ``ERROR`` is a misuse of the machine.

A flow too long for one module splits its handlers by sub-flow into partial machines,
``class IssueSteps(Machine[State], partial=True)``, each in a module of its own; the
machine inherits them and declares ``TABLE``, ``EMITS`` and the rest. Only a whole machine
is checked.

Every machine declares ``EMITS``, the effect types its handlers may return; emitting
another is a :class:`LocalFlowError` (so a driver knows, from data, which effects it must
carry out). A flow that starts another ends with a :class:`Handoff` as its last effect.

A machine's data lives in a ``CONTEXT`` dataclass of plain values, so ``to_dict()`` /
``from_dict()`` can park a flow between requests. The serialised form never holds a
secret: a submitted password or code is held apart (``_secret``); a user's password hash
and every dataclass field whose metadata is ``SECRET`` (a code digest, issued tokens, an
authorisation code) are written as ``None`` and the dict says ``"redacted": true``. A flow
restored from such a dict, or restored while it needed its ``_secret``, raises
:class:`LocalFlowError` on its next event: park flows where ``resumable`` is true.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, NamedTuple, Self, TypeVar

from bastion.core.auth.policy import AuthPolicy, FlowEnv
from bastion.core.auth.user import User
from bastion.core.errors import BastionError, Internal, ResourceExhausted

__all__ = [
    "SECRET",
    "Edge",
    "Effect",
    "Event",
    "Fail",
    "Handoff",
    "LocalFlowError",
    "Machine",
    "Table",
    "edge",
    "to_dot",
]

S = TypeVar("S", bound=enum.Enum)
T = TypeVar("T")


class LocalFlowError(Internal):
    """The driver fed a machine an event its current state does not accept.

    This is our own bug, never the caller's, hence a server error (h11's
    ``LocalProtocolError``). The machine is left in ``ERROR``.
    """


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Something the driver tells a machine: a request, or the result of an effect."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Effect:
    """Something a machine asks the driver to do.

    ``replies`` lists the events the driver must answer with; empty means fire-and-forget.
    """

    replies: ClassVar[tuple[type[Event], ...]] = ()


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Fail(Effect):
    """The flow refused the request: raise ``error(message)`` to the caller."""

    error: type[BastionError]
    message: str
    #: For a throttle (``ResourceExhausted``): seconds until the caller may try again.
    retry_after: int = 0

    def __post_init__(self) -> None:
        if getattr(self.error, "_abstract", True) or not issubclass(self.error, BastionError):
            raise TypeError(f"{self.error.__name__} is abstract or not a BastionError")
        if not self.message:
            raise ValueError("a failure needs a message")
        if self.retry_after and not issubclass(self.error, ResourceExhausted):
            raise ValueError("only a throttle names a retry_after")

    def exception(self) -> BastionError:
        if self.retry_after:
            return ResourceExhausted(self.message, retry_after=self.retry_after)
        return self.error(self.message)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Handoff(Effect):
    """This flow is finished; start the machine named ``flow`` (a key of
    ``core.state_machines.MACHINES``) with :attr:`event`. Always the last effect."""

    flow: ClassVar[str]

    @property
    def event(self) -> Event:
        raise NotImplementedError


#: metadata of a dataclass field ``Machine.to_dict`` never writes:
#: ``dataclasses.field(repr=False, metadata=SECRET)``
SECRET: Mapping[str, bool] = types.MappingProxyType({"secret": True})


class Edge(NamedTuple, Generic[S]):
    handler: str
    targets: tuple[S, ...]


def edge(handler: str, *targets: S) -> Edge[S]:
    if not targets:
        raise ValueError("an edge needs at least one target state")
    return Edge(handler, targets)


Table = dict[tuple[S, type[Event]], Edge[S]]


class Machine(Generic[S]):
    """Base of every flow machine; see the module docstring for the rules."""

    FLOW: ClassVar[str]
    STATES: ClassVar[type[enum.Enum]]
    TABLE: ClassVar[Mapping[tuple[Any, type[Event]], Edge[Any]]]
    CONTEXT: ClassVar[type[Any]]
    #: every effect type a handler of this machine may return
    EMITS: ClassVar[frozenset[type[Effect]]]

    def __init_subclass__(cls, *, partial: bool = False, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if partial:  # a share of a machine's handlers: the machine that inherits it is checked
            return
        if not all(isinstance(e, type) and issubclass(e, Effect) for e in cls.EMITS):
            raise TypeError(f"{cls.__name__}: EMITS holds something that is not an Effect")
        for (state, _event), entry in cls.TABLE.items():
            if not callable(getattr(cls, entry.handler, None)):
                raise TypeError(f"{cls.__name__}: no handler {entry.handler!r}")
            for target in (state, *entry.targets):
                if not isinstance(target, cls.STATES):
                    raise TypeError(f"{cls.__name__}: {target!r} is not a {cls.STATES}")
        for required in ("START", "DONE", "FAILED", "ERROR"):
            if required not in cls.STATES.__members__:
                raise TypeError(f"{cls.__name__}: State lacks {required}")

    def __init__(self, env: FlowEnv) -> None:
        self._env = env
        self._state: S = self._member("START")
        self.ctx = self.CONTEXT()
        self._secret: str | None = None
        #: restored from a dict that had secrets removed: it cannot go on
        self._redacted = False

    @property
    def state(self) -> S:
        return self._state

    @property
    def holds_secret(self) -> bool:
        """A submitted password or code is in flight: parking the flow now would lose it."""
        return self._secret is not None

    @property
    def resumable(self) -> bool:
        """``from_dict(to_dict())`` could go on: no secret in flight, none dropped from the
        context (a password hash, a code digest, tokens)."""
        return not (self.holds_secret or self._redacted or _Encoder().dropped_from(self.ctx))

    @property
    def policy(self) -> AuthPolicy:
        return self._env.policy

    def handle(self, event: Event) -> list[Effect]:
        state = self._state
        entry = self.TABLE.get((state, type(event)))
        if entry is None:
            self._state = self._member("ERROR")
            raise LocalFlowError(f"{type(event).__name__} not allowed in {self.FLOW} {state.name}")
        if self._redacted:
            self._state = self._member("ERROR")
            raise LocalFlowError(f"{self.FLOW}: restored without its secrets, it cannot go on")
        handler: Callable[[Event], tuple[list[Effect], S]] = getattr(self, entry.handler)
        effects, target = handler(event)
        self._check_outcome(state, event, effects, target, entry.targets)
        self._state = target
        return effects

    def _check_outcome(
        self,
        state: S,
        event: Event,
        effects: list[Effect],
        target: S,
        allowed: tuple[S, ...],
    ) -> None:
        failed = bool(effects) and isinstance(effects[-1], Fail)
        awaiting = [e for e in effects[:-1] if e.replies or isinstance(e, Handoff)]
        undeclared = [type(e).__name__ for e in effects if type(e) not in self.EMITS]
        problem = None
        if undeclared:
            problem = f"{self.FLOW} emitted {undeclared}, not in its EMITS"
        elif target not in allowed:
            problem = f"{target.name} is not a target of ({state.name}, {type(event).__name__})"
        elif failed != (target is self._member("FAILED")):
            problem = f"{target.name} does not match the outcome of ({state.name}, ...)"
        elif awaiting:
            problem = f"only the last effect may await a reply or hand off, got {awaiting!r}"
        if problem is not None:
            self._state = self._member("ERROR")
            raise LocalFlowError(problem)

    def _need_secret(self) -> str:
        if self._secret is None:
            self._state = self._member("ERROR")
            raise LocalFlowError(f"{self.FLOW}: the submitted password does not survive to_dict")
        return self._secret

    def _require(self, value: T | None) -> T:
        """A context value an earlier step must have set (restored flows may lack it)."""
        if value is None:
            self._state = self._member("ERROR")
            raise LocalFlowError(f"{self.FLOW}: context incomplete in {self._state.name}")
        return value

    def _member(self, name: str) -> S:
        member: S = self.STATES[name]  # type: ignore[assignment]
        return member

    def _fail(self, error: type[BastionError], message: str) -> tuple[list[Effect], S]:
        self._secret = None
        return [Fail(error=error, message=message)], self._member("FAILED")

    # -- serialisation ---------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The flow as plain JSON-able data, without any secret (see the module docstring)."""
        encoder = _Encoder()
        data = {"flow": self.FLOW, "state": self._state.name, "context": encoder(self.ctx)}
        if encoder.dropped or self._redacted:
            data["redacted"] = True
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], env: FlowEnv) -> Self:
        if data.get("flow") != cls.FLOW:
            raise ValueError(f"not a {cls.FLOW} flow: {data.get('flow')!r}")
        machine = cls(env)
        if data.get("state") not in cls.STATES.__members__:
            raise ValueError(f"{cls.FLOW} has no state {data.get('state')!r}")
        machine._state = machine._member(str(data["state"]))
        try:
            machine.ctx = _decode(cls.CONTEXT, data["context"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"corrupt {cls.FLOW} context: {exc}") from exc
        machine._redacted = bool(data.get("redacted"))
        return machine


class _Encoder:
    """Plain data from a context; secrets become ``None`` and set ``dropped``."""

    def __init__(self) -> None:
        self.dropped = False

    def dropped_from(self, value: Any) -> bool:
        self(value)
        return self.dropped

    def __call__(self, value: Any) -> Any:
        if isinstance(value, User):
            data = value.to_dict()
            if data["password_hash"] is not None:
                self.dropped, data["password_hash"] = True, None
            return data
        if isinstance(value, enum.Enum):
            return value.value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: self._field(value, f) for f in dataclasses.fields(value)}
        if isinstance(value, tuple | list):
            return [self(v) for v in value]
        if isinstance(value, Mapping):
            return {str(k): self(v) for k, v in value.items()}
        return value

    def _field(self, owner: Any, field: dataclasses.Field[Any]) -> Any:
        value = getattr(owner, field.name)
        if field.metadata.get("secret") and value is not None:
            self.dropped = True
            return None
        return self(value)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _decode(hint: Any, raw: Any) -> Any:
    if raw is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _decode(inner[0], raw) if len(inner) == 1 else raw
    if hint is User:
        return User.from_dict(raw)
    if origin is tuple:
        (item, *_rest) = typing.get_args(hint)
        return tuple(_decode(item, v) for v in raw)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(raw)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        hints = _hints(hint)
        names = [f.name for f in dataclasses.fields(hint)]
        return hint(**{name: _decode(hints[name], raw[name]) for name in names})
    return raw


def to_dot(table: Mapping[tuple[Any, type[Event]], Edge[Any]], name: str = "flow") -> str:
    """A Graphviz digraph of a transition table: one edge per (state, event, target)."""
    lines = [f'digraph "{name}" {{', "  rankdir=LR;"]
    for (state, event), entry in table.items():
        for target in entry.targets:
            lines.append(f'  "{state.name}" -> "{target.name}" [label="{event.__name__}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
