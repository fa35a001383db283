"""The key of a table's mirror (streaming_job/batch/keys.py; a Delta mirror's, read and recorded:
streaming_job/delta/keys.py): the records' key or land.keys, recorded in the mirror, checked batch after batch;
NULLs in land.keys columns. The end-to-end proof is tests/integration/test_land_keys.py."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from ingester.config import load_config
from ingester.records.format import Sequence
from streaming_job.batch.keys import KEY_PROPERTY, MirrorKeys, key_property, recorded_key
from streaming_job.batch.mirror import SEQ
from streaming_job.delta.keys import DeltaKeys
from streaming_job.lake.delta_log import TableLog
from streaming_job.runtime.errors import LandError


class _Spark:
    """Records the statements the keys send (ALTER TABLE ... SET TBLPROPERTIES)."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def sql(self, statement: str) -> None:
        self.statements.append(statement)


def _log(tmp_path: Path, configuration: dict[str, str] | None) -> TableLog:
    """A mirror's log as the driver reads it: none yet (None), or a table with these properties."""
    log = TableLog(str(tmp_path / "m"))
    if configuration is not None:
        log.version, log.metadata = 3, {"configuration": configuration}
    return log


def _keys(tmp_path: Path, configuration: dict[str, str] | None = None,
          configured: dict[str, list[str]] | None = None) -> tuple[MirrorKeys, _Spark]:
    spark = _Spark()
    log = _log(tmp_path, configuration)
    return DeltaKeys(spark, lambda db, t: f"/lake/{db}/{t}", lambda path: log).mirror_keys(configured or {}), spark


def _schemas(*keys: list[str], columns: tuple[str, ...] = ("a", "b", "c")) -> list[tuple[dict, str]]:
    return [({"columns": [[c, "int"] for c in columns], "pk": k}, f"7:{100 * i}:0") for i, k in enumerate(keys)]


def test_a_new_mirror_takes_the_tables_key_and_keeps_it(tmp_path) -> None:
    keys, spark = _keys(tmp_path)
    assert keys.key("d", "t", _schemas(["a"], ["a"])) == ["a"]
    assert keys.key("d", "t", _schemas(["a"])) == ["a"]  # known now: no second look at the mirror
    assert keys.key("d", "u", _schemas([], ["b", "a"])) == ["b", "a"]  # a table that gets a key: its mirror starts
    assert keys.key("d", "v", _schemas([])) == []  # no key: no mirror
    assert not spark.statements
    assert recorded_key(key_property(["b", "a"])) == ["b", "a"] and recorded_key({}) is None


@pytest.mark.parametrize(("batch", "said"), [
    ([["a"], ["b"]], r"but its rows from binlog position 7:100:0 \(file:position:index\) on are keyed by \(`b`\)"),
    ([["a"], []], r"but the table has no key from binlog position 7:100:0 \(file:position:index\) on"),
])
def test_a_key_that_changes_in_a_batch_stops_the_query(tmp_path, batch: list[list[str]], said: str) -> None:
    keys, _ = _keys(tmp_path)
    with pytest.raises(LandError, match=r"^`d`.`t`: its mirror is kept by the key \(`a`\), " + said) as exc:
        keys.key("d", "t", _schemas(*batch))
    message = str(exc.value)
    assert "\n" not in message and "land.keys (d.t: [a])" in message and "/lake/d/t" in message


def test_the_mirrors_recorded_key_is_checked_and_an_older_mirror_gets_one(tmp_path) -> None:
    keys, _ = _keys(tmp_path, key_property(["a", "b"]))
    assert keys.key("d", "t", _schemas(["a", "b"])) == ["a", "b"]
    keys, _ = _keys(tmp_path, key_property(["a", "b"]))
    with pytest.raises(LandError, match=r"kept by the key \(`a`, `b`\), but its rows from binlog position 7:0:0 "):
        keys.key("d", "t", _schemas(["c"]))
    keys, _ = _keys(tmp_path, key_property(["a"]))
    with pytest.raises(LandError, match="the table has no key from binlog position 7:0:0"):
        keys.key("d", "t", _schemas([]))
    # a mirror of an earlier binlake records none: it is kept by the table's key, recorded now
    keys, spark = _keys(tmp_path, {"delta.checkpointInterval": "1000"})
    assert keys.key("d", "t", _schemas(["a"])) == ["a"]
    assert spark.statements == [f"ALTER TABLE delta.`/lake/d/t` SET TBLPROPERTIES ('{KEY_PROPERTY}' = '[\"a\"]')"]
    keys, _ = _keys(tmp_path, {})
    with pytest.raises(LandError, match="kept by the key the table had, but the table has no key"):
        keys.key("d", "t", _schemas([]))


def test_land_keys_replace_the_tables_key(tmp_path) -> None:
    keys, _ = _keys(tmp_path, configured={"d.t": ["C", "a"]})
    # the table's own key changing does not matter; names are spelled as the table spells them
    assert keys.key("d", "t", _schemas([], ["b"])) == ["c", "a"]
    assert keys.key("d", "u", _schemas(["b"])) == ["b"]  # other tables: their own
    keys, _ = _keys(tmp_path, key_property(["b"]), configured={"d.t": ["a"]})
    with pytest.raises(LandError, match=r"kept by the key \(`b`\), but its rows .* keyed by \(`a`\)"):
        keys.key("d", "t", _schemas(["b"]))  # land.keys changed under an existing mirror
    keys, _ = _keys(tmp_path, configured={"d.t": ["a", "nope"]})
    with pytest.raises(LandError, match=r"^land.keys: `d`.`t` has no column `nope` \(its columns: a, b, c\)$"):
        keys.key("d", "t", _schemas([]))


def test_a_null_in_a_land_keys_column_stops_the_query_at_its_position(tmp_path) -> None:
    keys, _ = _keys(tmp_path, configured={"d.t": ["a", "b"]})
    first, second = Sequence(7, 400, 2).encode(), Sequence(7, 300, 0).encode()
    candidates = pa.table({"a": [1, 2, 3], "b": [1, None, None], SEQ: [Sequence(7, 100).encode(), first, second]})
    with pytest.raises(LandError, match=r"^`d`.`t`: its land.keys column `b` is NULL in a row at binlog position "
                                        r"7:300:0 \(file:position:index\)"):
        keys.check_nulls(candidates, "d", "t", ["a", "b"])
    keys.check_nulls(candidates.slice(0, 1), "d", "t", ["a", "b"])
    keys, _ = _keys(tmp_path)  # a table's own key is NOT NULL: not looked at
    keys.check_nulls(candidates, "d", "t", ["a", "b"])


def test_land_keys_configuration(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("land:\n  keys:\n    shop.lines: [order_no, line]\n    shop.events: id\n")
    assert load_config(path, environ={}).land.keys == {"shop.lines": ["order_no", "line"], "shop.events": ["id"]}
    env = {"BINLAKE_LAND_KEYS": "{shop.lines: [order_no, line]}"}
    assert load_config(environ=env).land.keys == {"shop.lines": ["order_no", "line"]}
    assert load_config(environ={}).land.keys == {}
    for value, said in [("{shop: [a]}", "'shop' is not <db>.<table>"),
                        ("[a]", "must map <db>.<table> to its key columns"),
                        ("{s.t: []}", "s.t: the key must be a column name or a list of them"),
                        ("{s.t: [a, A]}", "s.t: a column is named twice"),
                        ("{s.t: [a", "not YAML")]:
        with pytest.raises(ValueError, match=f"^environment.land.keys: {said}"):
            load_config(environ={"BINLAKE_LAND_KEYS": value})
