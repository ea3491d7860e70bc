from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from anchorgpu.ops.backups import BackupError, backup, default_path


class Command(BaseCommand):
    help = ("Back up the shop's database while it runs: SQLite through its online backup API, PostgreSQL with "
            "pg_dump. Prints the file written. The file is a secret (password hashes, TOTP secrets): it is "
            "written readable by its owner only (0600), in a folder made 0700.")

    def add_arguments(self, parser):
        parser.add_argument("--output", help="file to write (default: DATA_DIR/backups/anchorgpu-<UTC time>.*)")

    def handle(self, *args, **options):
        connection = connections["default"]
        output = Path(options["output"]) if options["output"] else default_path(settings.DATA_DIR / "backups",
                                                                               connection.vendor)
        try:
            written = backup(config=connection.settings_dict, connection=connection, output=output,
                             narrow_folder=not options["output"])
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{written} ({written.stat().st_size} bytes)")
