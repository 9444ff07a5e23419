"""SQL storage: schema, migrations and the transaction runner shared by every database."""

from bastion.storage.sql.database import Database, open_database
from bastion.storage.sql.migrate import MigrationReport, migrate

__all__ = ["Database", "MigrationReport", "migrate", "open_database"]
