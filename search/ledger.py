"""The ledger: the only way a run's records are written, store first and then the in-memory state.

The store is the truth and `SearchState` its cache; writing both by hand in several places let them drift.
Every part of the search that records something (a node, a hypothesis, an event, a meta value) holds the
ledger and nothing else of the store, so "committed before the next step" holds by construction: `add`
returns only once the row is durable, and the cache is updated from the stored record (with its id).

Not done here: deciding what to record, or reading the store (parts read `ledger.state`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from arts.search.state import Event, Record, SearchState
from arts.search.store import Store, table_of

R = TypeVar("R", bound=Record)

EVENT_TEXT_CHARS = 200
"""Free text kept in an event's payload (an evaluation's reason, an action) is cut to this; the node or
rollout keeps it whole."""


class Ledger:
    """Writes records to the run's store, then to the in-memory state it keeps in step."""

    def __init__(self, store: Store, state: SearchState | None = None):
        self.store = store
        self.state = state if state is not None else store.load_state()

    def add(self, record: R) -> R:
        """Store a new record (id 0); returns it with the id the store assigned."""
        record = self.store.add(record)
        getattr(self.state, table_of(record))[record.id] = record
        return record

    def update(self, record: R) -> R:
        """Store a changed record (it keeps its id)."""
        self.store.update(record)
        getattr(self.state, table_of(record))[record.id] = record
        return record

    def put(self, record: R) -> R:
        """Add a record that has no id yet, else update it (the form `search.investigation.space` returns)."""
        return self.add(record) if record.id == 0 else self.update(record)

    def event(self, kind: str, **payload: Any) -> Event:
        """Log an event (committed at once)."""
        event = self.store.log_event(kind, **payload)
        self.state.events[event.id] = event
        return event

    def events(self, kind: str) -> list[Event]:
        return [e for e in self.state.events.values() if e.kind == kind]

    def meta(self, key: str, default: Any = None) -> Any:
        return self.state.meta.get(key, default)

    def set_meta(self, key: str, value: Any) -> None:
        self.store.set_meta(key, value)
        self.state.meta[key] = value
