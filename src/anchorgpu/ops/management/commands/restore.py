from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from anchorgpu.ops.backups import BackupError, restore


class Command(BaseCommand):
    help = ("Restore a backup made by `anchorgpu backup` into a fresh database (SQLite file or PostgreSQL "
            "database, created when missing). Refuses a database that already holds tables unless --force.")

    def add_arguments(self, parser):
        parser.add_argument("backup", help="the backup file")
        parser.add_argument("--into", required=True, help="database URL to restore into, e.g. "
                            "postgres://user@host:5432/anchorgpu_restored or sqlite:////srv/restored.sqlite3")
        parser.add_argument("--force", action="store_true", help="replace what the target database holds")

    def handle(self, *args, **options):
        try:
            done = restore(path=Path(options["backup"]), into=options["into"], force=options["force"])
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(done)
