"""What the engine needs of CEL conditions without importing a CEL implementation.

google-re2 (the evaluator's ``matches``) loads when the first condition is compiled: a
model without conditions does not need it, and ``bastion-core`` installs it only with its
``conditions`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bastion.core.extras import MissingExtra, import_extra
from bastion.core.fga.errors import ConditionError

if TYPE_CHECKING:
    from bastion.core.fga.conditions import CompiledCondition
    from bastion.core.fga.model import Condition

__all__ = ["ConditionError", "compile_condition"]


def compile_condition(condition: Condition) -> CompiledCondition:
    """``condition`` type-checked and compiled (a :class:`ConditionError` if it is wrong, or
    if the ``conditions`` extra is not installed)."""
    try:
        import_extra("re2", extra="conditions", feature=f"condition {condition.name!r}")
    except MissingExtra as exc:
        raise ConditionError(str(exc)) from exc
    from bastion.core.fga.conditions import CompiledCondition

    return CompiledCondition(condition)
