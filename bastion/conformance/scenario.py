"""A scenario: written once against the abstract client, run once per surface.

A scenario is a function of a :class:`Ctx`. ``ctx.call(operation, request, credentials)``
goes through the surface under test and is recorded, in its normal form, in the run's
transcript; the runner compares the transcripts of the surfaces step by step. The
``expect_*`` helpers check the scenario's own expectation and stop the run on a miss.
Names made with ``ctx.unique`` are masked before comparing, so each surface works on its
own users and data.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from bastion.conformance.discovery import NO_ADMIN, SUITE_DOMAIN, Deployment
from bastion.conformance.operations import OPERATIONS, Operation
from bastion.conformance.outcome import NONE, VOLATILE_KEYS, Credentials, Outcome, normal_form
from bastion.conformance.surfaces.base import Surface
from bastion.conformance.web import Browser

ALL_SURFACES: tuple[str, ...] = ("rest", "graphql", "grpc")
HTTP_SURFACES: tuple[str, ...] = ("rest", "graphql")


class Failure(Exception):
    """The scenario's expectation did not hold on this surface."""


class Skip(Exception):
    """The scenario cannot run here (a feature the deployment has off); says which."""


class NotOffered(Exception):
    """The surface does not offer an operation the scenario needs."""

    def __init__(self, operation: str) -> None:
        super().__init__(operation)
        self.operation = operation


@dataclass(frozen=True, slots=True)
class Step:
    label: str
    outcome: Outcome
    form: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    run: Callable[[Ctx], None]
    #: Surfaces the rows apply to (HTTP-only rows: 405, CSRF).
    surfaces: tuple[str, ...] = ALL_SURFACES
    #: Installs a model, resets a store or changes global state: only with --destructive.
    destructive: bool = False
    #: Why this deployment cannot run the scenario, or None.
    requires: Callable[[Deployment], str | None] | None = None
    #: Keys masked before comparing, beyond :data:`VOLATILE_KEYS`.
    volatile: frozenset[str] = frozenset()
    doc: str = ""
    #: The row is about rate limits: it sees every refusal, none is waited out.
    sees_throttles: bool = False


CATALOGUE: list[Scenario] = []


def scenario(
    name: str,
    *,
    surfaces: tuple[str, ...] = ALL_SURFACES,
    destructive: bool = False,
    requires: Callable[[Deployment], str | None] | None = None,
    volatile: frozenset[str] = frozenset(),
    sees_throttles: bool = False,
) -> Callable[[Callable[[Ctx], None]], Callable[[Ctx], None]]:
    """Register ``fn`` in :data:`CATALOGUE` (its docstring is the row's description)."""

    def register(fn: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
        if any(s.name == name for s in CATALOGUE):
            raise ValueError(f"duplicate scenario {name}")
        CATALOGUE.append(
            Scenario(
                name,
                fn,
                surfaces,
                destructive,
                requires,
                volatile,
                (fn.__doc__ or "").strip(),
                sees_throttles,
            )
        )
        return fn

    return register


@dataclass
class Ctx:
    surface: Surface
    deployment: Deployment
    scenario: Scenario
    unique: str = field(default_factory=lambda: "cf" + secrets.token_hex(5))
    transcript: list[Step] = field(default_factory=list)
    cleanups: list[Callable[[], object]] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    _counter: int = 0

    @property
    def admin(self) -> Credentials:
        """The admin's credentials; a run without --admin-secret skips the row here."""
        if self.deployment.admin_secret is None:
            raise Skip(NO_ADMIN)
        return self.deployment.admin_credentials

    def name(self, kind: str = "x") -> str:
        """A name no other run uses (masked as ``<unique>`` when compared)."""
        self._counter += 1
        return f"{self.unique}{kind}{self._counter}"

    def email(self) -> str:
        return f"{self.name('u')}@{SUITE_DOMAIN}"

    def call(
        self,
        operation: str,
        request: dict[str, Any] | None = None,
        credentials: Credentials = NONE,
        *,
        label: str | None = None,
        only: tuple[str, ...] | None = None,
        code_only: bool = False,
    ) -> Outcome:
        """Call ``operation`` on the surface under test and record the normalised answer.

        ``only``: compare just these body keys (where the spec gives one surface more
        fields than the others' schemas can carry). ``code_only``: compare the error code,
        not the message (GraphQL's own input validation words its refusals itself).
        """
        outcome = self.raw_call(operation, request, credentials)
        masked = VOLATILE_KEYS | self.scenario.volatile
        form = normal_form(outcome, (self.unique,), masked)
        if only is not None and "body" in form:
            form["body"] = {k: v for k, v in form["body"].items() if k in only}
        if code_only and "error" in form:
            form["error"] = {"code": form["error"]["code"]}
        step = Step(label or operation, outcome, form)
        self.transcript.append(step)
        # A protocol slip fails the cell but does not stop the run: the transcript stays
        # comparable with the other surfaces'.
        self.anomalies.extend(
            f"step {len(self.transcript)} ({step.label}): {a}" for a in outcome.anomalies
        )
        return outcome

    def raw_call(
        self, operation: str, request: dict[str, Any] | None = None, credentials: Credentials = NONE
    ) -> Outcome:
        """A call that is not compared (setup the scenario does not assert on, cleanup)."""
        outcome = self.send(OPERATIONS[operation], dict(request or {}), credentials)
        if not outcome.offered:
            raise NotOffered(operation)
        return outcome

    def instances(self) -> list[str]:
        """Every instance's base URL (one for a single-process deployment)."""
        return self.deployment.base_urls or [self.deployment.base_url]

    def browser(self, instance: int = 0) -> Browser:
        """A fresh user agent on instance ``instance`` (modulo their number)."""
        urls = self.instances()
        agent = Browser(self.deployment, urls[instance % len(urls)])
        self.cleanups.append(agent.close)
        return agent

    def cleanup(self, operation: str, request: dict[str, Any], credentials: Credentials) -> None:
        """Undo what the scenario made, after it ends, pass or fail."""
        self.cleanups.append(lambda: self.send(OPERATIONS[operation], request, credentials))

    def send(
        self, operation: Operation, request: dict[str, Any], credentials: Credentials
    ) -> Outcome:
        """One call through the run's pacer (waits out a throttle that changed nothing)."""
        return self.deployment.pacer.send(
            lambda: self.surface.call(operation, request, credentials),
            sees_throttles=self.scenario.sees_throttles,
        )

    # -- expectations --------------------------------------------------------------------

    def expect(self, condition: bool, message: str) -> None:
        if not condition:
            step = self.transcript[-1].label if self.transcript else "before any call"
            raise Failure(f"step {len(self.transcript)} ({step}): {message}")

    def expect_ok(self, outcome: Outcome, **fields: Any) -> dict[str, Any]:
        if not outcome.ok:
            self.expect(False, f"expected success, got {outcome.describe()}")
        for key, wanted in fields.items():
            got = outcome.body.get(key)
            if got != wanted and not (got is None and not wanted):
                self.expect(False, f"expected {key}={wanted!r}, got {got!r} in {outcome.body}")
        return outcome.body

    def expect_error(self, outcome: Outcome, code: str, message: str | None = None) -> None:
        if outcome.ok:
            self.expect(False, f"expected error {code}, got {outcome.describe()}")
        if outcome.code != code:
            self.expect(False, f"expected error {code}, got {outcome.code}: {outcome.message!r}")
        if message is not None and outcome.message != message:
            self.expect(False, f"expected message {message!r}, got {outcome.message!r}")

    def skip(self, reason: str) -> NoReturn:
        raise Skip(reason)
