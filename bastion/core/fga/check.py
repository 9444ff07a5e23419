"""Check: does ``user`` have ``relation`` on ``object``? OpenFGA's rewrite dispatch.

Evaluation walks the relation's rewrite tree. A hop through a userset tuple or a
tuple-to-userset tuple is a *dispatch*: it costs one depth (the 25th fails with 2002) and
carries the path's visited ``(object, relation)`` steps, so that a revisit answers
``False`` with the cycle flag. Computed relations and set operators are free. Outcomes
without an error or a cycle are memoised for the rest of the request.

Each relation's rewrite is compiled once per model into nested closures (a *plan*,
:mod:`core.fga.check_plans`), so the hot path does no pattern matching and builds no
closure per step (a set operator is its reducer with the children bound), and a plan that
names another relation holds that relation's plan instead of looking it up per step. A
check never changes its user, so the
user, its form and the depth live on the :class:`Checker` for the running check and a plan
is called with the object alone; the memo is keyed by ``(object, relation)`` under the
user (one memo per user) and also marks the steps on the path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from bastion.core.fga.check_plans import Plan, plans_of
from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.request import RequestContext, RequestOptions
from bastion.core.fga.result import ALLOWED, CYCLE, Outcome
from bastion.core.fga.tuples import TupleKey, TupleReader
from bastion.core.fga.typesystem import TypeSystem

__all__ = [
    "Checker",
    "Step",
    "SubproblemCache",
    "check",
    "validate_check_object",
    "validate_check_request",
    "validate_check_user",
]

#: ``(object, relation)``: one sub-problem of the running check (whose user is fixed), as
#: memoised and as marked on the path.
Step = tuple[str, str]


class SubproblemCache(Protocol):
    """A cache of definitive sub-problem outcomes shared beyond one request."""

    def resolve(self, checker: Checker, step: Step, plan: Plan | None) -> Outcome:
        """The cached outcome of ``step`` for the checker's user, else
        ``checker.evaluate(step, plan)`` (kept when definitive)."""
        ...


class Checker:
    """Evaluates Check sub-problems for one request (memo lives as long as the request)."""

    def __init__(self, request: RequestContext, cache: SubproblemCache | None = None) -> None:
        self.request = request
        self.reader = request.reader
        self.max_depth = request.max_depth
        #: Consulted on a dispatch the memo cannot answer, and given its definitive answers.
        self.cache = cache
        self.plans = plans_of(request.ts)
        self._tuple_problem = request.ts.tuple_problem
        self._memos: dict[str, dict[Step, Outcome]] = {}
        self._memo: dict[Step, Outcome] = {}
        self.depth = 0
        #: The user of the running check (a check never changes its user) and its form.
        self.user = ""
        self.user_type = ""
        self.user_wildcard = False
        self.user_relation = ""
        #: The form as one string, the key of the direct plans' per-form flags.
        self.form = ""
        #: ``(object, relation)`` when the user is the userset ``object#relation``.
        self._userset: Step | None = None

    # ------------------------------------------------------------ entry points

    def check(self, obj: str, relation: str, user: str) -> bool:
        """The answer, or :class:`FgaError` if evaluation failed."""
        if user != self.user:
            self._set_user(user)
        self.depth = 0
        step = (obj, relation)
        outcome = self._memo.get(step)
        if outcome is None:
            plan = self.plans.get((obj.partition(":")[0], relation))
            cache = self.cache
            try:
                outcome = (
                    self.evaluate(step, plan) if cache is None else cache.resolve(self, step, plan)
                )
            except BaseException as exc:
                # The steps left mid-evaluation are still marked in the memo: drop it.
                self._memos.pop(user, None)
                self._memo = {}
                self.user = ""
                if isinstance(exc, RecursionError):
                    # computed relations cost no depth: a chain of hundreds of them ends on
                    # the interpreter's stack before the depth limit, with OpenFGA's error
                    raise self.request.depth_exceeded() from None
                raise
        if outcome.error is not None:
            raise outcome.error
        return outcome.allowed

    def _set_user(self, user: str) -> None:
        self.user = user
        memo = self._memos.get(user)
        if memo is None:
            memo = self._memos[user] = {}
        self._memo = memo
        userset, _, user_relation = user.partition("#")
        user_type, _, user_id = userset.partition(":")
        self.user_type = user_type
        self.user_wildcard = user_id == "*"
        self.user_relation = user_relation
        self.form = f"{user_type}:{'*' if self.user_wildcard else ''}#{user_relation}"
        self._userset = (userset, user_relation) if user_relation else None

    def resolve(self, obj: str, relation: str, plan: Plan | None) -> Outcome:
        """``obj#relation`` for the user at the current depth, through the memo."""
        step = (obj, relation)
        cached = self._memo.get(step)
        if cached is not None:
            return cached
        return self.evaluate(step, plan)

    def dispatch(self, obj: str, relation: str, plan: Plan | None) -> Outcome:
        """A hop through a tuple: one depth more, through the memo and the cache."""
        depth = self.depth
        if depth + 1 >= self.max_depth:
            return Outcome.failed(self.request.depth_exceeded())
        step = (obj, relation)
        cached = self._memo.get(step)
        if cached is not None:
            return cached
        self.depth = depth + 1
        cache = self.cache
        outcome = self.evaluate(step, plan) if cache is None else cache.resolve(self, step, plan)
        self.depth = depth
        return outcome

    def evaluate(self, step: Step, plan: Plan | None) -> Outcome:
        """``step``, not in the memo, evaluated (``plan`` is its relation's); its outcome is
        memoised when definitive.

        While it is evaluated the memo holds :data:`CYCLE` for it, so that a revisit on the
        path answers ``False`` with the cycle flag: the memo doubles as the path.
        """
        memo = self._memo
        memo[step] = CYCLE
        if step == self._userset:
            outcome = ALLOWED
        elif plan is None:
            outcome = _relation_not_found(*step)
        else:
            outcome = plan(self, step[0])
        if outcome.error is None and not outcome.cycle:
            memo[step] = outcome
        else:
            del memo[step]
        return outcome

    # ------------------------------------------------------------ tuple reads

    def passing(self, keys: Sequence[TupleKey]) -> tuple[list[TupleKey], FgaError | None]:
        """Tuples valid under the model whose condition holds, and the first deferred error."""
        passing: list[TupleKey] = []
        error: FgaError | None = None
        problem = self._tuple_problem
        for key in keys:
            if problem(key) is not None:
                continue
            if not key.condition:
                passing.append(key)
                continue
            try:
                if self.request.condition_holds(key):
                    passing.append(key)
            except FgaError as exc:
                error = error or exc
        return passing, error


def _relation_not_found(obj: str, relation: str) -> Outcome:
    object_type = obj.partition(":")[0]
    return Outcome.failed(
        FgaError(ErrorCode.RELATION_NOT_FOUND, f"relation '{object_type}#{relation}' not found")
    )


def validate_check_object(ts: TypeSystem, obj: str, relation: str) -> None:
    """OpenFGA's loose validation of Check's object and relation: every problem is 2000."""
    problem = ts.object_problem(obj, relation)
    if problem is not None:
        raise FgaError(ErrorCode.VALIDATION_ERROR, problem[1])


def validate_check_user(ts: TypeSystem, user: str) -> None:
    """OpenFGA's validation of Check's user: 2000 when malformed or unknown to the model."""
    problem = ts.user_problem(user)
    if problem is not None:
        raise FgaError(ErrorCode.VALIDATION_ERROR, problem)


def validate_check_request(ts: TypeSystem, obj: str, relation: str, user: str) -> None:
    """OpenFGA's loose validation of Check's tuple key: every problem is 2000."""
    validate_check_object(ts, obj, relation)
    validate_check_user(ts, user)


def check(
    ts: TypeSystem,
    store: TupleReader,
    obj: str,
    relation: str,
    user: str,
    options: RequestOptions | None = None,
    *,
    cache: SubproblemCache | None = None,
) -> bool:
    """Check one tuple against the model and the store (plus contextual tuples).

    ``cache`` answers and keeps sub-problems beyond this request, e.g.
    :meth:`core.fga.cache.CheckCache.scoped`.
    """
    options = options or RequestOptions()
    validate_check_request(ts, obj, relation, user)
    _reject_bad_context(options.context)
    request = RequestContext(ts, store, options)
    return Checker(request, cache).check(obj, relation, user)


def _reject_bad_context(context: Mapping[str, object]) -> None:
    if not isinstance(context, Mapping):
        raise FgaError(ErrorCode.VALIDATION_ERROR, "context must be an object")
