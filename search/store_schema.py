"""The layout of a run's store: one table per record kind, its schema version and the migrations between
versions.

`TABLES` says which table holds each record kind and which fields are copied into columns (and indexed) for
filtering; `prepare` creates that layout in a fresh database in one transaction, or checks the version of an
existing one and migrates it step by step, each step in its own transaction. `search.store` owns the
connection, the run's lock and every read and write of records; nothing here reads or writes a record.
The store's errors are defined here, where the first of them is raised.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from arts.search.state import Event, Evidence, Hypothesis, Insight, Node, Observation, Record, Rollout

SCHEMA_VERSION = 1
"""Version of the table layout below; bump it and add a migration when the layout changes."""
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {}
"""version v → function that migrates a store at v to v + 1 (run inside one transaction)."""


class StoreError(RuntimeError):
    """A run store cannot be opened or used; the message says what to do."""


class StoreVersionError(StoreError):
    """The store was written with a schema version this code cannot read."""


@dataclass(frozen=True)
class Table:
    """Where one record kind is stored."""

    name: str
    """Table name; equal to the `SearchState` field holding this kind."""
    columns: tuple[str, ...]
    """Fields copied into their own columns, so filters on them need not parse the JSON."""
    indexed: tuple[str, ...]
    """Columns with an index: only those the search looks up often (each index costs every write)."""


TABLES: dict[type[Record], Table] = {
    Node: Table("nodes", ("parent", "status", "score", "round"), ("parent", "score")),
    Hypothesis: Table("hypotheses", ("status", "parent"), ("status",)),
    Observation: Table("observations", ("node", "region"), ()),
    Evidence: Table("evidence", ("observation", "hypothesis"), ("hypothesis",)),
    Insight: Table("insights", ("active", "kind"), ()),
    Rollout: Table("rollouts", ("round", "group", "node"), ("group",)),
    Event: Table("events", ("kind",), ("kind",)),
}
"""Column names are the field names, always double-quoted in SQL ('group' is a keyword)."""


def schema_statements() -> list[str]:
    """The SQL that creates the current layout in an empty database, version row included."""
    stmts = ["CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"]
    for t in TABLES.values():
        cols = "".join(f', "{c}"' for c in t.columns)
        stmts.append(f"CREATE TABLE {t.name} (id INTEGER PRIMARY KEY, data TEXT NOT NULL{cols})")
        stmts += [f'CREATE INDEX {t.name}_{c} ON {t.name}("{c}")' for c in t.indexed]
    stmts.append(f"INSERT INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}')")
    return stmts


def prepare(conn: sqlite3.Connection, db: Path, create: bool) -> None:
    """Create the schema in a fresh database, or check (and migrate) the version of an existing one."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "meta" not in tables:
        if tables:
            raise StoreError(
                f"{db} is not an arts run store (it has no meta table); use another run directory"
            )
        if not create:
            raise StoreError(f"{db} holds no run yet; start a new run there, or check the run directory")
        with transaction(conn):  # all tables and the version, or nothing
            for stmt in schema_statements():
                conn.execute(stmt)
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    version = json.loads(row[0]) if row else None
    if not isinstance(version, int):
        raise StoreError(
            f"{db} has no valid schema_version in its meta table; it is not a readable arts store"
        )
    if version > SCHEMA_VERSION:
        raise StoreVersionError(
            f"{db} was written by a newer arts (store schema {version}; this arts reads schema "
            f"{SCHEMA_VERSION}); upgrade arts to open this run"
        )
    while version < SCHEMA_VERSION:
        migrate = MIGRATIONS.get(version)
        if migrate is None:
            raise StoreVersionError(
                f"{db} uses store schema {version}, which this arts (schema {SCHEMA_VERSION}) cannot migrate; "
                "open it with the arts version that wrote it, or start a new run"
            )
        with transaction(conn):
            migrate(conn)
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version + 1),))
        version += 1


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One explicit write transaction on an autocommit connection: committed whole, or rolled back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
