"""The run's store: every record of a run in one SQLite file, so a run killed at any moment resumes intact.

`runs/<id>/arts.db` holds one table per record kind (`id INTEGER PRIMARY KEY`, the record's JSON dump
minus its id in `data`, plus a few fields copied into columns for filtering) and a `meta` key/value
table; that layout, its version and its migrations are `search.store_schema`. Each write is its own
committed transaction: once `add` returns, the row survives a SIGKILL of the process (WAL mode).
`synchronous=NORMAL` gives up durability only across an OS crash or power loss, and keeps a commit to a
WAL append (~0.1-0.4 ms for a node) instead of an fsync (~2 ms). `load_state()`
rebuilds the whole `SearchState` from the database alone; the `nodes/<id>/` folders are a view of it.

One process owns a run at a time: `Store.open` takes an exclusive `flock` on `runs/<id>/lock` and fails
fast with `StoreLocked` (naming the holder's pid) instead of letting two writers interleave. The kernel
drops the lock when its holder dies, even by SIGKILL. The lock file descriptor is not inherited across
`exec` (sandbox subprocesses cannot keep a run locked), but a bare `fork()` child does share it.

Not done here: no deletes (records are retired by status, never removed); writing node folders (`search.nodefiles`).
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, TypeVar

from arts.search.nodefiles import write_files
from arts.search.state import Event, Node, Record, SearchState
from arts.search.store_schema import (
    SCHEMA_VERSION,
    TABLES,
    StoreError,
    StoreVersionError,
    Table,
    prepare,
)

R = TypeVar("R", bound=Record)


class StoreLocked(StoreError):
    """Another process (or another open Store in this one) holds the run."""


def _lock(run_dir: Path) -> int:
    """Take the run's exclusive lock (non-blocking) and record our pid in the lock file."""
    fd = os.open(run_dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)  # O_CLOEXEC by default (PEP 446)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StoreLocked(
            f"run {run_dir} is in use by process {holder} (from the lock file); wait for it to finish or stop it"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _unlock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def table_of(record: Record) -> str:
    """The `SearchState` field (and table) that holds records of this kind."""
    return Store._table(type(record)).name


def _load(cls: type[R], id: int, data: str) -> R:
    record = cls.model_validate_json(data)
    record.id = id  # `data` holds every field but the id, which is the row's primary key
    return record


class Store:
    """The persistent state of one run. Thread-safe within the process that opened it."""

    def __init__(self, run_dir: Path, conn: sqlite3.Connection, lock_fd: int) -> None:
        """Use `Store.open`, which takes the lock and checks the schema."""
        self.run_dir = run_dir
        self.db_path = run_dir / "arts.db"
        self._conn: sqlite3.Connection | None = conn
        self._lock_fd = lock_fd
        self._mu = threading.RLock()

    @classmethod
    def open(cls, run_dir: Path | str, *, create: bool = True) -> Store:
        """Open (or with `create`, make) the store of the run in `run_dir`, taking its lock."""
        run_dir = Path(run_dir)
        db = run_dir / "arts.db"
        if not create and not db.exists():
            raise StoreError(f"no run store at {db}; check the run directory, or start a new run")
        if run_dir.exists() and not run_dir.is_dir():
            raise StoreError(f"the run directory {run_dir} is a file; choose a folder for --run-dir")
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = _lock(run_dir)
        try:
            conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                prepare(conn, db, create)
            except sqlite3.DatabaseError as e:
                conn.close()
                raise StoreError(
                    f"{db} is not an arts run store ({e}); choose another --run-dir or move the file away"
                ) from None
            except BaseException:
                conn.close()
                raise
        except BaseException:
            _unlock(fd)
            raise
        return cls(run_dir, conn, fd)

    @staticmethod
    def holds_run(run_dir: Path | str) -> bool:
        """Whether run_dir holds a run whose schema was committed. An arts.db that a kill left before its
        first commit (no tables) holds none: a new run may start there."""
        db = Path(run_dir) / "arts.db"
        if not db.is_file():
            return False
        try:
            conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error:
            return True  # something is there: let Store.open say what
        try:
            return bool(conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone())
        except sqlite3.DatabaseError:
            return True  # not SQLite: Store.open will say so
        finally:
            conn.close()

    @classmethod
    def open_readonly(cls, run_dir: Path | str) -> Store:
        """Open a run's store for reading only, without its lock, so that `arts status`, `runs`, `report`
        and the exports can read a run while its search writes it (WAL readers never block the writer).
        Any write through it fails with sqlite3's "attempt to write a readonly database"."""
        run_dir = Path(run_dir)
        db = run_dir / "arts.db"
        if not db.exists():
            raise StoreError(f"no run store at {db}; check the run directory, or start a new run")
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.DatabaseError as e:
            conn.close()
            raise StoreError(f"{db} is not a readable arts run store ({e})") from None
        if row is None or json.loads(row[0]) != SCHEMA_VERSION:
            conn.close()
            raise StoreVersionError(
                f"{db} has store schema {row and row[0]}; this arts reads {SCHEMA_VERSION}"
            )
        # no lock is held: /dev/null stands in for the lock file, so close()'s unlock is a no-op
        return cls(run_dir, conn, os.open(os.devnull, os.O_RDONLY))

    def close(self) -> None:
        """Close the database (checkpointing the WAL) and release the run's lock. Idempotent."""
        with self._mu:
            if self._conn is None:
                return
            self._conn.close()
            self._conn = None
            _unlock(self._lock_fd)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        """One statement in autocommit mode: committed when this returns."""
        with self._mu:
            if self._conn is None:
                raise StoreError(f"the store of {self.run_dir} is closed; open it again with Store.open")
            return self._conn.execute(sql, params)

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        with self._mu:
            return self._write(sql, params).fetchall()

    @staticmethod
    def _table(cls: type[Record]) -> Table:
        try:
            return TABLES[cls]
        except KeyError:
            known = ", ".join(k.__name__ for k in TABLES)
            raise TypeError(f"{cls.__name__} is not a stored record kind; known kinds: {known}") from None

    # -- records -----------------------------------------------------------------------------------

    def add(self, record: R) -> R:
        """Insert a new record; returns a copy carrying the id the store assigned (1, 2, ... per kind)."""
        if record.id:
            raise ValueError(
                f"{type(record).__name__} {record.id} is already stored; use update() to change it"
            )
        t = self._table(type(record))
        cols = "".join(f', "{c}"' for c in t.columns)
        marks = ", ?" * len(t.columns)
        values = tuple(getattr(record, f) for f in t.columns)
        data = record.model_dump_json(exclude={"id"})
        cur = self._write(f"INSERT INTO {t.name} (data{cols}) VALUES (?{marks})", (data, *values))
        return record.model_copy(update={"id": cur.lastrowid})

    def update(self, record: Record) -> None:
        """Replace the stored record with the same id."""
        t = self._table(type(record))
        sets = "".join(f', "{c}" = ?' for c in t.columns)
        values = tuple(getattr(record, f) for f in t.columns)
        data = record.model_dump_json(exclude={"id"})
        cur = self._write(f"UPDATE {t.name} SET data = ?{sets} WHERE id = ?", (data, *values, record.id))
        if cur.rowcount != 1:
            raise KeyError(f"no {t.name} row with id {record.id} in {self.db_path}; add() it first")

    def get(self, cls: type[R], id: int) -> R:
        """The record of kind `cls` with this id; KeyError if there is none."""
        t = self._table(cls)
        rows = self._read(f"SELECT data FROM {t.name} WHERE id = ?", (id,))
        if not rows:
            raise KeyError(f"no {t.name} row with id {id} in {self.db_path}")
        return _load(cls, id, rows[0][0])

    def all(self, cls: type[R], **filters: Any) -> list[R]:
        """Records of kind `cls` whose fields equal the given values (None matches null), ordered by id."""
        t = self._table(cls)
        where, params = [], []
        for field, value in filters.items():
            if field not in cls.model_fields:
                raise ValueError(
                    f"{cls.__name__} has no field {field!r}; fields: {', '.join(cls.model_fields)}"
                )
            if isinstance(value, (dict, list)):
                raise ValueError(f"filter {field}= must be a scalar, not {type(value).__name__}")
            col = f'"{field}"' if field in (*t.columns, "id") else f"json_extract(data, '$.{field}')"
            where.append(f"{col} IS NULL" if value is None else f"{col} = ?")
            params += [] if value is None else [value]
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self._read(f"SELECT id, data FROM {t.name}{clause} ORDER BY id", tuple(params))
        return [_load(cls, i, d) for i, d in rows]

    def count(self, cls: type[Record]) -> int:
        """Number of stored records of kind `cls`."""
        return self._read(f"SELECT count(*) FROM {self._table(cls).name}")[0][0]

    def log_event(self, kind: str, /, **payload: Any) -> Event:
        """Append an event (JSON-serialisable payload, which may itself hold a "kind") and return it."""
        return self.add(Event(kind=kind, payload=payload))

    def events(self, kind: str | None = None, since_id: int = 0) -> list[Event]:
        """Events with id > since_id, optionally of one kind, oldest first."""
        sql, params = "SELECT id, data FROM events WHERE id > ?", [since_id]
        if kind is not None:
            sql, params = sql + " AND kind = ?", params + [kind]
        rows = self._read(sql + " ORDER BY id", tuple(params))
        return [_load(Event, i, d) for i, d in rows]

    # -- run metadata ------------------------------------------------------------------------------

    def set_meta(self, key: str, value: Any) -> None:
        """Set a run-level value (JSON-serialisable); 'schema_version' belongs to the store."""
        if key == "schema_version":
            raise ValueError("schema_version is managed by the store and cannot be set")
        self._write("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        """A run-level value, or `default` when unset."""
        rows = self._read("SELECT value FROM meta WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else default

    # -- whole state and node folders --------------------------------------------------------------

    def load_state(self) -> SearchState:
        """Rebuild the whole search state from the database alone."""
        kinds: dict[str, Any] = {}
        with self._mu:  # one consistent snapshot: no write from another thread in between
            for cls, t in TABLES.items():
                rows = self._read(f"SELECT id, data FROM {t.name} ORDER BY id")
                kinds[t.name] = {i: _load(cls, i, d) for i, d in rows}
            meta = {k: json.loads(v) for k, v in self._read("SELECT key, value FROM meta")}
        return SearchState(**kinds, meta=meta)

    def node_dir(self, node_id: int) -> Path:
        """The folder of a node's files, logs and results: runs/<id>/nodes/<node_id>/."""
        return self.run_dir / "nodes" / str(node_id)

    def write_node_files(self, node: Node) -> Path:
        """Write the node's editable files into its folder (all or none; see `search.nodefiles`)."""
        return write_files(self.node_dir(node.id), node)
