"""The facts every log line written while serving one request carries (its request id,
and its trace id when tracing is on).

A context variable, so that a line logged anywhere below the transport that set it (the
service, storage, an outbox hop in the same task) joins the access log's line without
each caller passing the id along. Lives in ``core`` because every layer may log.
"""

from __future__ import annotations

from contextvars import ContextVar

#: The ``x-request-id`` of the request being served, or "" outside any request.
request_id: ContextVar[str] = ContextVar("bastion_request_id", default="")
#: The W3C trace id (32 hex digits) of the request being served when it is traced
#: (``--otel-traces-endpoint``), or "".
trace_id: ContextVar[str] = ContextVar("bastion_trace_id", default="")
