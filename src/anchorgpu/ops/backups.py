"""Backups of either database, and restoring one into a fresh database.

* SQLite: the online backup API (a consistent copy while the shop runs),
  checked with ``PRAGMA integrity_check``.
* PostgreSQL: ``pg_dump`` in its custom format, checked by ``pg_restore
  --list``; restored with ``pg_restore --exit-on-error`` into a database that
  is created when missing and must be empty unless forced.

A backup is a secret: it holds password hashes, the operators' TOTP secrets
and every customer's details. The file is created readable by its owner only
(0600), before a byte is written, and a folder the backup makes is 0700; the
default folder is narrowed to 0700 too.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import dj_database_url

SQLITE_MAGIC = b"SQLite format 3\x00"
PGDUMP_MAGIC = b"PGDMP"


class BackupError(Exception):
    """A clear reason, for the command to print (never a traceback)."""


def default_path(directory: Path, vendor: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return directory / f"anchorgpu-{stamp}.{'sqlite3' if vendor == 'sqlite' else 'pgdump'}"


def _pg_env(config: dict) -> dict:
    env = dict(os.environ)
    for key, name in (("HOST", "PGHOST"), ("PORT", "PGPORT"), ("USER", "PGUSER"), ("PASSWORD", "PGPASSWORD")):
        if config.get(key):
            env[name] = str(config[key])
    return env


def _tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise BackupError(f"{name} is not installed (Debian: apt-get install postgresql-client)")
    return found


FILE_MODE, FOLDER_MODE = 0o600, 0o700


def private_folder(directory: Path, *, narrow: bool) -> None:
    """Make ``directory`` (and any missing parent) 0700; with ``narrow``, an existing one is made 0700 too."""
    missing = [p for p in (directory, *directory.parents) if not p.exists()]
    directory.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    for made in missing:
        os.chmod(made, FOLDER_MODE)  # mkdir's mode passes through the umask
    if narrow:
        os.chmod(directory, FOLDER_MODE)


def _private_file(path: Path) -> None:
    """Create ``path`` empty and readable by its owner only, whatever the umask (SQLite and pg_dump then
    write into it and keep its mode)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    except FileExistsError:
        raise BackupError(f"{path} already exists; remove the leftover of an interrupted backup") from None
    os.chmod(path, FILE_MODE)


def backup(*, config: dict, connection, output: Path, narrow_folder: bool = False) -> Path:
    """Write a backup of the database ``config`` describes to ``output`` (which must not exist), readable
    by its owner only. ``narrow_folder``: make an existing folder 0700 as well (the default folder)."""
    if output.exists():
        raise BackupError(f"{output} already exists; a backup never overwrites a file")
    private_folder(output.parent, narrow=narrow_folder)
    partial = output.with_name(output.name + ".partial")
    _private_file(partial)
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        target = sqlite3.connect(partial)
        try:
            connection.connection.backup(target)
            verdict = target.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            target.close()
        if verdict != "ok":
            partial.unlink(missing_ok=True)
            raise BackupError(f"the copy failed its integrity check: {verdict}")
    elif connection.vendor == "postgresql":
        done = subprocess.run([_tool("pg_dump"), "--format=custom", "--no-owner", f"--file={partial}",
                               config["NAME"]], env=_pg_env(config), capture_output=True, text=True)
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            raise BackupError(f"pg_dump failed: {done.stderr.strip()[:500]}")
        listed = subprocess.run([_tool("pg_restore"), "--list", str(partial)], capture_output=True, text=True)
        if listed.returncode != 0:
            partial.unlink(missing_ok=True)
            raise BackupError(f"the dump cannot be read back: {listed.stderr.strip()[:500]}")
    else:
        partial.unlink(missing_ok=True)
        raise BackupError(f"no backup method for the {connection.vendor} database")
    os.chmod(partial, FILE_MODE)
    partial.rename(output)
    return output


def kind_of(path: Path) -> str:
    if not path.is_file():
        raise BackupError(f"{path} is not a file")
    with path.open("rb") as handle:
        head = handle.read(16)
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    if head.startswith(PGDUMP_MAGIC):
        return "postgresql"
    raise BackupError(f"{path} is neither a SQLite backup nor a pg_dump archive")


def restore(*, path: Path, into: str, force: bool = False) -> str:
    """Restore the backup at ``path`` into the database at URL ``into``; returns what was done."""
    kind = kind_of(path)
    try:
        config = dj_database_url.parse(into)
    except Exception as exc:  # noqa: BLE001 - dj-database-url raises several types for bad URLs
        raise BackupError(f"not a database URL: {into!r} ({exc})") from None
    engine = config["ENGINE"]
    if kind == "sqlite" and engine.endswith("sqlite3"):
        return _restore_sqlite(path, Path(config["NAME"]), force)
    if kind == "postgresql" and "postgresql" in engine:
        return _restore_postgres(path, config, force)
    raise BackupError(f"a {kind} backup restores into a {kind} database, not {engine.rsplit('.', 1)[-1]}")


def _restore_sqlite(path: Path, target: Path, force: bool) -> str:
    if target.exists() and target.stat().st_size:
        probe = sqlite3.connect(target)
        try:
            tables = probe.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
        finally:
            probe.close()
        if tables and not force:
            raise BackupError(f"{target} already holds {tables} tables; restore into a fresh file, or pass --force")
    source, dest = sqlite3.connect(f"file:{path}?mode=ro", uri=True), sqlite3.connect(target)
    try:
        source.backup(dest)
    finally:
        source.close()
        dest.close()
    return f"restored {path} into {target}"


def _restore_postgres(path: Path, config: dict, force: bool) -> str:
    import psycopg
    from psycopg import sql

    name = config["NAME"]
    params = {k.lower(): config[k] for k in ("HOST", "PORT", "USER", "PASSWORD") if config.get(k)}
    try:
        with psycopg.connect(dbname="postgres", autocommit=True, **params) as admin:
            exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
            if not exists:
                admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        with psycopg.connect(dbname=name, **params) as target:
            tables = target.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0]
    except psycopg.Error as exc:
        raise BackupError(f"cannot reach the target database: {str(exc).strip()[:300]}") from None
    if tables and not force:
        raise BackupError(f"database {name} already holds {tables} tables; restore into a fresh one, or pass --force")
    command = [_tool("pg_restore"), "--no-owner", "--exit-on-error", f"--dbname={name}", str(path)]
    if force:
        command[1:1] = ["--clean", "--if-exists"]
    done = subprocess.run(command, env=_pg_env(config), capture_output=True, text=True)
    if done.returncode != 0:
        raise BackupError(f"pg_restore failed: {done.stderr.strip()[:500]}")
    return f"restored {path} into database {name}"
