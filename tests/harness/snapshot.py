"""Snapshots under writes: a thread writing to the table being snapshotted, and the table replayed from the
committed records in sequence order (snapshot rows as inserts, then binlog changes)."""

from __future__ import annotations

import random
import threading
import time

from ingester.codec import events as E


class WriteWorkload(threading.Thread):
    """Inserts, updates and deletes on the table being snapshotted (t: id, v, s), until stopped."""

    def __init__(self, server, db: str, rows: int = 100_000) -> None:
        super().__init__(daemon=True)
        self.rows = rows
        self.conn = server.connect(db)
        self.conn.autocommit(True)
        self.stop = threading.Event()
        self.changes = 0

    def run(self) -> None:
        rnd = random.Random(7)
        with self.conn.cursor() as cur:
            while not self.stop.is_set():
                op, i = rnd.random(), rnd.randrange(1, self.rows)
                if op < 0.4:
                    cur.execute("UPDATE t SET v = v + 1, s = CONCAT('u', v) WHERE id = %s", (i,))
                elif op < 0.6:
                    cur.execute("DELETE FROM t WHERE id = %s", (i,))
                else:
                    cur.execute("REPLACE INTO t VALUES (%s, %s, 'new')", (rnd.randrange(1, 2 * self.rows), i))
                self.changes += 1
                time.sleep(0.001)


def replay_in_seq_order(items, db: str, table: str) -> tuple[dict[int, tuple], list[tuple]]:
    """Snapshot rows as inserts, then binlog changes, in sequence order; also every (seq, id) seen."""
    state: dict[int, tuple] = {}
    seen = []
    for item in sorted(items, key=lambda i: i.seq):
        ev = item.event
        if not isinstance(ev, E.RowsEvent) or (ev.database, ev.table) != (db, table):
            continue
        for row in ev.rows:
            if "before" in row:
                state.pop(row["before"]["id"], None)
            if "after" in row:
                after = row["after"]
                state[after["id"]] = (after["v"], after["s"])
            seen.append((item.seq, (row.get("after") or row["before"])["id"], ev.kind))
    return state, seen
