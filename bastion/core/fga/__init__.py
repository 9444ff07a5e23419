"""An OpenFGA-compatible relationship engine: pure, synchronous, I/O-free.

Parse a model once (``dsl_parser.parse_model`` or ``model.model_from_json``), validate it
(``validation``), index it (``typesystem.TypeSystem``), then ask ``check``,
``list_objects``, ``list_users`` or ``expand`` against any ``tuples.TupleReader``; an
async store drives the same calls read by read through ``steps.Evaluation``.
Failures are :class:`~core.fga.errors.FgaError` with OpenFGA's numeric code.
"""

from bastion.core.fga.check import check
from bastion.core.fga.dsl_parser import parse_model
from bastion.core.fga.errors import ConditionError, ErrorCode, FgaError
from bastion.core.fga.expand import expand
from bastion.core.fga.list_objects import ListResult, list_objects
from bastion.core.fga.list_users import UserFilter, list_users
from bastion.core.fga.request import RequestOptions
from bastion.core.fga.steps import Evaluation, Read
from bastion.core.fga.tuples import MemoryTupleReader, TupleKey, TupleReader
from bastion.core.fga.typesystem import TypeSystem
from bastion.core.fga.validation import check_model, validate_model

__all__ = [
    "ConditionError",
    "ErrorCode",
    "Evaluation",
    "FgaError",
    "ListResult",
    "MemoryTupleReader",
    "Read",
    "RequestOptions",
    "TupleKey",
    "TupleReader",
    "TypeSystem",
    "UserFilter",
    "check",
    "check_model",
    "expand",
    "list_objects",
    "list_users",
    "parse_model",
    "validate_model",
]
