"""The retention flags: how long logs are kept and how the background prune runs.

Declared apart from the rest of :class:`~bastion.core.settings.declaration.Settings`
(which inherits them) to keep that module readable."""

from __future__ import annotations

from dataclasses import dataclass

from bastion.core.settings.vocabulary import Group, flag_field

_R = Group.RETENTION


@dataclass(frozen=True, kw_only=True)
class RetentionFlags:
    audit_log_retention_days: int = flag_field(
        0, _R, "Delete audit log rows older than this many days; 0: keep them forever."
    )
    webhook_log_retention_days: int = flag_field(
        0, _R, "Delete webhook delivery logs older than this many days; 0: keep them forever."
    )
    prune_interval: float = flag_field(
        60.0,
        _R,
        "Seconds between background prunes (expired verification requests, codes and "
        "memory-store rows always; logs past their retention); 0: never prune.",
    )
    prune_batch_size: int = flag_field(
        1000, _R, "Rows deleted per statement by the prune (each batch its own transaction)."
    )
