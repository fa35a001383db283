"""The native routing core of `binlake run` (_router.c) against the Python reference: same records, same
checkpoints, same stats, same errors.

Every comparison runs the daemon's real loop (Runner._stream over BinlogStream.positioned) twice on the
same replication stream, once with the extension and once with it switched off (as BINLAKE_PURE_PYTHON=1
does), publishing into a recording publisher whose commit policy is deterministic. The streams are real
binlogs (the corpus, and a MariaDB OLTP workload written for the test) framed as the server sends them,
cut into reads at random sizes, mutated, truncated, with heartbeats, ROTATEs and 16 MB multi-packets;
and the server's own replication stream.
"""

from __future__ import annotations

import functools
import importlib
import os
import random
import socket
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingester.codec.decoder import CHECKSUM_CRC32, CHECKSUM_OFF
from ingester.config import Config
from ingester.daemon import runner as runner_module
from ingester.records import builder as builder_module
from ingester.records.builder import Checkpoint, Record, RecordBuilder
from ingester.sources import replication
from tests.corpus import CORPUS, manifest
from tests.harness.xa_binlogs import XaBinlog

# Imported directly, so the comparisons run even under BINLAKE_PURE_PYTHON (and fail if it is not built).
NATIVE = importlib.import_module("ingester.records._router")
_MAX_PACKET = 0xFFFFFF
_HEARTBEAT = 27


def test_only_binlake_pure_python_switches_the_router_off() -> None:
    """bootstrap builds it; the builder uses it unless BINLAKE_PURE_PYTHON asks for the reference path."""
    assert (builder_module._native is None) == bool(os.environ.get("BINLAKE_PURE_PYTHON"))


# ---------------------------------------------------------------------------------------- streams


def split_events(data: bytes) -> list[bytes]:
    """A binlog file's events by their size fields (the rest in one piece where a size is broken)."""
    events, pos = [], 4
    while pos < len(data):
        size = struct.unpack_from("<I", data, pos + 9)[0] if len(data) - pos >= 13 else 0
        if size < 13 or pos + size > len(data):
            events.append(data[pos:])
            break
        events.append(data[pos : pos + size])
        pos += size
    return events


def event(code: int, body: bytes, log_pos: int, crc: bool, timestamp: int = 0, flags: int = 0) -> bytes:
    size = 19 + len(body) + (4 if crc else 0)
    ev = struct.pack("<IBIIIH", timestamp, code, 1, size, log_pos, flags) + body
    return ev + struct.pack("<I", zlib.crc32(ev)) if crc else ev


def fake_rotate(name: str, crc: bool) -> bytes:
    """What a server sends first: an artificial ROTATE (log position 0) naming the file."""
    return event(4, struct.pack("<Q", 4) + name.encode(), 0, crc, flags=0x20)


def framed(events: list[bytes]) -> bytes:
    """The events as replication packets (OK byte, sequence ids from 1, 16 MB multi-packets), then EOF."""
    out, seq = bytearray(), 1
    for ev in events:
        payload = b"\0" + ev
        while True:
            piece, payload = payload[:_MAX_PACKET], payload[_MAX_PACKET:]
            out += struct.pack("<I", len(piece) | seq << 24) + piece
            seq = (seq + 1) & 0xFF
            if len(piece) < _MAX_PACKET:
                break
    out += struct.pack("<I", 5 | seq << 24) + b"\xfe\0\0\0\0"
    return bytes(out)


class Reads:
    """The replication socket: its reads are pieces of random sizes (or whole 1 MiB reads without a seed);
    select() sees ``idle``, a socket without data, so every read looks like the last one for now."""

    def __init__(self, data: bytes, seed: int | None, idle: socket.socket) -> None:
        self.data, self.pos, self.rng = data, 0, random.Random(seed) if seed is not None else None
        self.idle = idle

    def fileno(self) -> int:
        return self.idle.fileno()

    def settimeout(self, timeout: float | None) -> None:
        pass

    def recv(self, n: int) -> bytes:
        if self.rng is not None:
            n = min(n, self.rng.choice((1, 3, 7, 64, 500, 4096, 70_000)))
        out = self.data[self.pos : self.pos + n]
        self.pos += len(out)
        return out


class Publisher:
    """Records what the daemon publishes. Commits complete at once; ``busy`` says whether one is always
    in flight (the loop then commits only when idle and at the end) or never (at every transaction)."""

    across_tables = False  # binlake's format

    def __init__(self, busy: bool) -> None:
        self.busy = busy
        self.out: list[Any] = []
        self.expected: list[str] = []  # topics announced ahead (Publisher.mapped, expect)

    @property
    def committing(self) -> bool:
        return self.busy

    def expect(self, record_topics: list[str]) -> None:
        self.expected.extend(record_topics)

    def mapped(self, record_topic: str, table_map: Any, schema_entry: bytes) -> None:
        self.expected.append(record_topic)

    def send(self, record: Record) -> None:
        # a table's topic is announced before its first record (its Kafka topic made meanwhile); binlake's own
        # topics (_schema, _schema_history) are made at start-up
        assert record.topic in self.expected or record.topic.startswith("_"), record.topic
        self.out.append(("record", record.topic, record.key, record.value, record.headers, record.seq))

    def send_prepared(self, record: Record) -> int:
        self.send(record)
        return sum(1 for o in self.out if o[1] == record.topic) - 1

    def commit(self, checkpoint: Checkpoint, done: Any = None) -> None:
        self.out.append(("commit", checkpoint))
        if done is not None:
            done()

    def wait(self) -> None:
        pass

    def abort(self) -> None:
        self.out.append(("abort",))


def run(monkeypatch: pytest.MonkeyPatch, native: bool, data: bytes | None, *, crc: bool = True,
        busy: bool = False, seed: int | None = None, source: str = "mysql://root@127.0.0.1:1",
        start_file: str = "binlog.000001", start_position: int = 4, include: list[str] | None = None,
        **builder_options: Any) -> tuple[list[Any], str | None, dict[str, int], int]:
    """What the daemon publishes from ``data`` (framed packets; None: the server at ``source``), its error,
    stats, and how many events the native router took."""
    cfg = Config()
    cfg.source.url, cfg.source.start_file, cfg.source.start_position = source, start_file, start_position
    cfg.exit_at_end = True
    if include is not None:
        cfg.filters.include = include
    if "max_record_bytes" in builder_options:
        cfg.kafka.max_record_bytes = builder_options.pop("max_record_bytes")
    idle_sock, other = socket.socketpair()
    routed = 0
    route = RecordBuilder.route

    def counted(builder: RecordBuilder, *args: Any) -> Any:
        nonlocal routed
        result = route(builder, *args)
        routed += result[2] if result else 0
        return result

    with monkeypatch.context() as m:
        m.setattr(builder_module, "_native", NATIVE if native else None)
        m.setattr(RecordBuilder, "route", counted)
        if builder_options:
            m.setattr(runner_module, "RecordBuilder", functools.partial(RecordBuilder, **builder_options))
        if data is not None:
            def connect(stream: replication.BinlogStream) -> None:
                stream.checksum = CHECKSUM_CRC32 if crc else CHECKSUM_OFF
                stream.is_mariadb = True
                stream._conn = type("Conn", (), {"_sock": Reads(data, seed, idle_sock),
                                                 "close": lambda self: None})()

            m.setattr(replication.BinlogStream, "_connect", connect)
            m.setattr(replication.BinlogStream, "_register", lambda stream: None)
            m.setattr(replication.BinlogStream, "_dump", lambda stream: None)
        runner = runner_module.Runner(cfg)
        publisher = Publisher(busy)
        error = None
        try:
            runner._stream(publisher)  # type: ignore[arg-type]
        except Exception as exc:  # compared, not judged: both paths must fail alike
            error = f"{type(exc).__name__}: {exc}"
    idle_sock.close()
    other.close()
    stats = {k: v for k, v in runner.stats.items() if k != "streaming_ms"}
    return publisher.out, error, stats, routed


def same(monkeypatch: pytest.MonkeyPatch, data: bytes | None, **options: Any) -> tuple[list[Any], str | None, int]:
    """Publications and error (the reference's), and the share of events the native router took."""
    ours = run(monkeypatch, True, data, **options)
    reference = run(monkeypatch, False, data, **options)
    assert ours[1] == reference[1]
    assert len(ours[0]) == len(reference[0])
    for mine, theirs in zip(ours[0], reference[0], strict=True):
        assert mine == theirs
    assert ours[2] == reference[2]
    assert reference[3] == 0
    return reference[0], reference[1], ours[3] / max(1, ours[2]["events"])


# ---------------------------------------------------------------------------------------- corpus


def _corpus_stream(path: Path, crc: bool) -> bytes:
    name = path.name if path.suffix[1:].isdigit() else "binlog.000001"
    return framed([fake_rotate(name, crc), *split_events(path.read_bytes())])


@pytest.mark.parametrize("busy", [False, True], ids=["commit-each", "commit-idle"])
@pytest.mark.parametrize("entry", manifest(), ids=lambda e: f"{e.path.parent.name}/{e.path.name}")
def test_corpus_streams_route_identically(entry, busy, monkeypatch) -> None:
    crc = entry.checksum == "CRC32"
    same(monkeypatch, _corpus_stream(entry.path, crc), crc=crc, busy=busy, seed=len(entry.path.name))


# MySQL transactions (GTID, BEGIN, TABLE_MAP, rows, XID) with and without checksums
MYSQL_OLTP = ["osheroff-mysql-binlog-connector-java/mysql-bin.checksum-crc32",
              "osheroff-mysql-binlog-connector-java/mysql-bin.checksum-none", "alibaba-canal/mysql-bin.000001"]


@pytest.mark.parametrize("name", MYSQL_OLTP)
def test_mysql_transactions_route_natively(name, monkeypatch) -> None:
    """MySQL GTIDs and repeated BEGINs are the native router's too: most events never reach Python."""
    crc = name.endswith("crc32")
    _, error, native_share = same(monkeypatch, _corpus_stream(CORPUS / name, crc), crc=crc)
    assert error is None
    assert native_share > 0.7


@pytest.mark.parametrize("busy", [False, True], ids=["commit-each", "commit-idle"])
@pytest.mark.parametrize("maria", [False, True], ids=["mysql", "mariadb"])
def test_xa_transactions_route_identically(maria, busy, monkeypatch) -> None:
    """Prepared XA transactions held back (records/xa.py) while ordinary ones go on natively: the same records,
    _prepared's included, and checkpoints; none of an XA body is routed by C."""
    binlog = XaBinlog(maria)
    for i in range(20):
        binlog.plain({b"t": [i]})
        if i % 5 == 0:
            binlog.prepare(f"x{i}", {b"t": [100 + i], b"u": [200 + i]})
        if i % 5 == 3:
            binlog.outcome(f"x{i - 3}", commit=i % 2 == 1)
    events = [raw for raw, _ in binlog.raw()]
    out, error, native_share = same(monkeypatch, framed([fake_rotate("binlog.000001", True), *events]), busy=busy)
    assert error is None
    assert native_share > 0.3
    published = b"".join(o[3] for o in out if o[0] == "record" and o[1] == "db.t")
    assert b"r100" in published and b"r105" not in published  # x0 committed, x5 rolled back


# ---------------------------------------------------------------------------------------- OLTP workload


@pytest.fixture(scope="module")
def oltp(mariadb) -> tuple[list[bytes], str]:
    """A MariaDB OLTP binlog of its own file: single-row transactions on three tables (one filtered out
    below), a few multi-statement and multi-table ones, a DDL, a big row."""
    mariadb.execute("DROP DATABASE IF EXISTS router_oltp")
    mariadb.execute("CREATE DATABASE router_oltp")
    for table in ("a", "b", "skipped"):
        mariadb.execute(f"CREATE TABLE IF NOT EXISTS router_oltp.{table} (id INT PRIMARY KEY, n INT, s MEDIUMTEXT)")
    mariadb.flush_logs()
    start = mariadb.current_binlog_position()
    rng = random.Random(7)
    with mariadb.connect(autocommit=True) as conn, conn.cursor() as cur:
        for i in range(1500):
            table = rng.choice(("a", "a", "b", "skipped"))
            cur.execute(f"INSERT INTO router_oltp.{table} VALUES (%s, %s, %s)", (i, i, "x" * rng.randrange(200)))
            if i % 3 == 0:
                cur.execute(f"UPDATE router_oltp.{table} SET n = n + 1 WHERE id = %s", (i,))
            if i % 7 == 0:
                cur.execute(f"DELETE FROM router_oltp.{table} WHERE id = %s", (i,))
            if i % 250 == 0:
                cur.execute("BEGIN")
                cur.execute("UPDATE router_oltp.a SET n = n + 1")
                cur.execute("UPDATE router_oltp.b SET s = 'many'")
                cur.execute("COMMIT")
        cur.execute("ALTER TABLE router_oltp.b ADD COLUMN t INT")
        cur.execute("INSERT INTO router_oltp.b (id, n, s) VALUES (100000, 1, %s)", ("y" * 300_000,))
    mariadb.flush_logs()
    return split_events((Path(mariadb.binlog_dir) / start.file).read_bytes()), start.file


@pytest.mark.integration  # the OLTP stream comes from the session's MariaDB
@pytest.mark.parametrize("max_record_bytes", [900_000, 1, 333, 5000])
@pytest.mark.parametrize("busy", [False, True], ids=["commit-each", "commit-idle"])
def test_oltp_workload_routes_identically(oltp, busy, max_record_bytes, monkeypatch) -> None:
    """Records close at max_record_bytes boundaries (1: one event a record) exactly where Python closes them."""
    events, name = oltp
    out, error, native_share = same(monkeypatch, framed([fake_rotate(name, True), *events]), busy=busy,
                                    max_record_bytes=max_record_bytes, include=["router_oltp.a", "router_oltp.b"],
                                    start_file=name)
    assert error is None
    assert native_share > (0.95 if max_record_bytes > 5000 else 0.4)
    assert sum(1 for o in out if o[0] == "record") >= (2 if max_record_bytes > 5000 else 100)


@pytest.mark.integration  # the OLTP stream comes from the session's MariaDB
@pytest.mark.parametrize("seed", range(4))
def test_oltp_reads_of_any_size(oltp, seed, monkeypatch) -> None:
    events, name = oltp
    _, _, native_share = same(monkeypatch, framed([fake_rotate(name, True), *events]), seed=seed,
                              max_open_bytes=20_000, start_file=name)
    assert native_share > 0.5


@pytest.mark.integration  # the OLTP stream comes from the session's MariaDB
def test_heartbeats_rotates_and_multi_packets(oltp, monkeypatch) -> None:
    """Heartbeats anywhere (inside transactions too), a ROTATE to a next file, and a rows event of 17 MB
    (a multi-packet) on a routed table."""
    events, name = oltp
    rng = random.Random(3)
    mixed: list[bytes] = [fake_rotate(name, True)]
    big_done = False
    for i, ev in enumerate(events):
        mixed.append(ev)
        log_pos = struct.unpack_from("<I", ev, 13)[0]
        if rng.random() < 0.05:
            mixed.append(event(_HEARTBEAT, name.encode(), log_pos, True))
        if not big_done and ev[4] == 19 and b"router_oltp\0\x01a\0" in ev and events[i + 1][4] in (23, 30):
            rows = events[i + 1]
            body = rows[19:-4] + b"\0" * (17 << 20)
            mixed.append(event(rows[4], body, log_pos + 19 + len(body) + 4, True, flags=0))
            big_done = True
    assert big_done
    following = "binlog.999999"
    rotate = event(4, struct.pack("<Q", 4) + following.encode(), 0, True)
    mixed += [rotate, fake_rotate(following, True), events[0], *events[1:200]]
    _, error, native_share = same(monkeypatch, framed(mixed), seed=11, start_file=name)
    assert error is None
    assert native_share > 0.9


@pytest.mark.integration  # the OLTP stream comes from the session's MariaDB
@pytest.mark.parametrize("source", ["oltp", *MYSQL_OLTP[:2]])
def test_mutated_and_truncated_streams(oltp, source, monkeypatch) -> None:
    """Any damaged byte or cut: the same records before it, the same error naming the same place."""
    crc = not source.endswith("none")
    if source == "oltp":
        events, name = oltp
        data = framed([fake_rotate(name, True), *events[:600]])
    else:
        data = _corpus_stream(CORPUS / source, crc)
    rng = random.Random(5)
    errors = set()
    for _ in range(40):
        damaged = bytearray(data)
        for _ in range(rng.choice((1, 2, 5))):
            damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
        _, error, _ = same(monkeypatch, bytes(damaged), crc=crc, busy=rng.random() < 0.5)
        errors.add(error)
    for _ in range(15):
        _, error, _ = same(monkeypatch, data[: rng.randrange(len(data))], crc=crc, seed=rng.randrange(100))
        assert error is not None and "closed the replication connection" in error
    assert len(errors) > 5  # the damage was seen, in many ways


@pytest.mark.integration  # the OLTP stream comes from the session's MariaDB
def test_server_stream_routes_identically(mariadb, oltp, monkeypatch) -> None:
    """The server's own replication stream, from the workload's file to the end of the binlog."""
    _, name = oltp
    out, error, native_share = same(monkeypatch, None, source=mariadb.url, start_file=name,
                                    include=["router_oltp.*"])
    assert error is None
    assert any(o[0] == "record" for o in out)
    assert native_share > 0.9


def _checkpoints(out: list[Any]) -> Iterator[Checkpoint]:
    return (o[1] for o in out if o[0] == "commit")


@pytest.mark.integration  # the OLTP stream comes from the session's MariaDB
def test_checkpoints_carry_every_gtid(oltp, monkeypatch) -> None:
    """Not only equal: the last checkpoint holds the workload's last GTID, as the server wrote it."""
    events, name = oltp
    out, _, _ = same(monkeypatch, framed([fake_rotate(name, True), *events]), start_file=name)
    last = list(_checkpoints(out))[-1]
    gtids = [ev for ev in events if ev[4] == 162]
    seq, domain = struct.unpack_from("<QI", gtids[-1], 19)
    server_id = struct.unpack_from("<I", gtids[-1], 5)[0]
    assert last.gtid_set == f"{domain}-{server_id}-{seq}"
