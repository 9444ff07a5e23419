"""The storage a server process opens, from its flags."""

from __future__ import annotations

from bastion.core.settings import Settings
from bastion.storage import StorageConfig

__all__ = ["storage_config"]


def storage_config(settings: Settings, *, worker: bool = False) -> StorageConfig:
    """``worker``: a ``--workers`` process; its parent migrated, so it only checks."""
    return StorageConfig(
        database_type=settings.database_type,
        database_url=settings.database_url,
        database_host=settings.database_host,
        database_port=settings.database_port,
        database_name=settings.database_name,
        database_username=settings.database_username,
        database_password=settings.database_password,
        database_cert=settings.database_cert,
        database_ca_cert=settings.database_ca_cert,
        database_cert_key=settings.database_cert_key,
        memory_store_url=settings.memory_store_url,
        timeout=settings.request_timeout,
        run_migrations=settings.migrate == "auto" and not worker,
        check_schema=settings.migrate == "off" or worker,
    )
