"""Table statement records made by hand (records/statement.py) for tests of the land side's statements that need
a statement the daemon does not publish by itself (a damaged or unknown one, a statement of a table the daemon
never mapped). Statements the daemon publishes are tested through the daemon."""

from __future__ import annotations

from kafka import KafkaProducer

from ingester.records.format import Sequence
from ingester.records.statement import TableStatement, index_entry, statement_value


def publish_statement(bootstrap: str, prefix: str, statement: TableStatement, seq: Sequence,
                      commit_ts: int = 1_700_000_000_000_000) -> None:
    """One table statement entry as a record of its own on its table's topic (not transactional)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        db, table = statement.database, statement.table
        producer.send(f"{prefix}.{db}.{table}", statement_value([statement]), key=f"{db}.{table}".encode(),
                      headers=[("binlake.v", b"2"), ("binlake.seq", seq.encode()), ("binlake.count", b"1"),
                               ("binlake.db", db.encode()), ("binlake.table", table.encode()),
                               ("binlake.commit_ts", str(commit_ts).encode()),
                               ("binlake.index", index_entry(seq.encode(), commit_ts))]).get(timeout=30)
    finally:
        producer.close()


def ensure_topic(bootstrap: str, topic: str) -> None:
    """The topic, created where it does not exist yet (the test broker creates none by itself)."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        if topic not in admin.list_topics():
            try:
                admin.create_topics([NewTopic(topic, 1, 1)])
            except TopicAlreadyExistsError:
                pass
    finally:
        admin.close()


def next_position(conn) -> Sequence:
    """Where the server's binlog goes on: the next statement's first event (its sequence lies after every row
    change written before it and before every one after it)."""
    from ingester.records.format import file_number

    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        name, position = cur.fetchone()[:2]
    return Sequence(file_number(name), int(position))


def described(conn, db: str, table: str) -> dict:
    """The table's ``columns`` and ``primary_key`` as a statement entry carries them (the snapshot descriptor's,
    from information_schema: what the daemon's schema history gives)."""
    import orjson

    from ingester.daemon.snapshot import table_reader

    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        mariadb = "mariadb" in cur.fetchone()[0].lower()
        cur.execute("SELECT COLLATION_NAME, ID FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
        collations = {str(n): int(i) for n, i in cur.fetchall()}
    d = orjson.loads(table_reader(conn, db, table, collations, mariadb).descriptor)
    return {"columns": d["columns"], "primary_key": d["primary_key"], "mariadb": mariadb}


class StatementLog:
    """Statements run on a server by a test, each with its entries (records/statement.py) at the statement's
    binlog position, as the daemon is to publish them: before each statement the daemon publishes the rows so
    far (``flush``: run_daemon; a record of the daemon's never holds rows of both sides of a statement), the
    entries follow them in their topics, and the rows after the statement come after the entries."""

    def __init__(self, conn, flush, bootstrap: str, prefix: str) -> None:
        self.conn, self.flush, self.bootstrap, self.prefix = conn, flush, bootstrap, prefix

    def run(self, sql: str, *entries: dict, database: str = "") -> Sequence:
        """``sql`` run at its position; ``entries``: TableStatement fields but ``statement`` (its text) and
        ``default_database``, each entry in its table's topic (``"described": True``: with the table's columns
        after the statement, as a daemon with schema history gives them)."""
        self.flush()
        at = next_position(self.conn)
        with self.conn.cursor() as cur:
            cur.execute(sql)
        self.conn.commit()
        for e in entries:
            e = dict(e)
            if e.pop("described", False):
                e.update(described(self.conn, e["database"], e["table"]))
            statement = TableStatement(statement=sql, default_database=database or e["database"], **e)
            ensure_topic(self.bootstrap, f"{self.prefix}.{statement.database}.{statement.table}")
            publish_statement(self.bootstrap, self.prefix, statement, at)
        return at
