"""SQL storage: schema, migrations and the transaction runner shared by every database."""

from storage.sql.database import Database, open_database
from storage.sql.migrate import MigrationReport, migrate

__all__ = ["Database", "MigrationReport", "migrate", "open_database"]
