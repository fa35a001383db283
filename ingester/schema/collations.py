"""The server's collations: names, ids and each charset's default (sans-I/O but for ``capture_collations``).

A FULL TABLE_MAP names each text, ENUM and SET column's collation by id; the schema history knows a column's
collation by name (COLLATE's, or its charset's for that charset's default). The daemon reads the server's table
once (information_schema); without it (tests, tools) a charset's default is its lowest id (``collation_id_of``),
right for MariaDB's and MySQL 5.7's charsets but not for MySQL 8's utf8mb4 (utf8mb4_0900_ai_ci).
"""

from __future__ import annotations

from typing import Any

from ..codec.charsets import BINARY_COLLATION, COLLATION_CHARSET, charset_of, collation_id_of


class Collations:
    """Collation name <-> id, and each charset's default collation, as one server has them."""

    def __init__(self, rows: list[tuple[str, str, int, bool]] | None = None) -> None:
        """``rows``: (collation name, charset name, id, whether it is its charset's default)."""
        self.ids: dict[str, int] = {}
        self.names: dict[int, str] = {}
        self.defaults: dict[str, int] = {}
        for name, charset, cid, default in rows or ():
            self.ids[name.lower()] = cid
            self.names.setdefault(cid, name.lower())
            if default:
                self.defaults[charset_of(charset)] = cid

    def __bool__(self) -> bool:
        return bool(self.ids)

    def name_of(self, cid: int) -> str | None:
        return self.names.get(cid)

    def id_of(self, collation: str | None, mariadb: bool, defaults: dict[str, int] | None = None) -> int | None:
        """The id of a collation's name, or of a charset's default collation for a charset's name (``defaults``: a
        statement's own, e.g. MariaDB's character_set_collations); None when unknown."""
        if collation is None:
            return None
        low = collation.lower()
        if low == "binary":
            return BINARY_COLLATION
        if "_" not in low:  # a charset: its default
            charset = charset_of(low)
            found = (defaults or {}).get(charset) or self.defaults.get(charset)
            return found if found is not None else collation_id_of(charset, mariadb)
        found = self.ids.get(low)
        if found is not None:
            return found
        # not in the table (none read): the charset's lowest id names its charset at least
        charset = charset_of(low)
        return collation_id_of(charset, mariadb) if charset in COLLATION_CHARSET.values() else None


def capture_collations(cur: Any) -> Collations:
    """The server's collations (MariaDB 10.10+ lists charset-specific names of its UCA 14 collations, with their
    ids, in COLLATION_CHARACTER_SET_APPLICABILITY; older servers and MySQL in COLLATIONS)."""

    def text(v: Any) -> str:
        return v.decode() if isinstance(v, bytes | bytearray) else str(v)

    try:
        cur.execute("SELECT FULL_COLLATION_NAME, CHARACTER_SET_NAME, ID, IS_DEFAULT"
                    " FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY WHERE ID IS NOT NULL")
    except Exception:  # no such columns (MySQL, MariaDB before 10.10): the older table
        cur.execute("SELECT COLLATION_NAME, CHARACTER_SET_NAME, ID, IS_DEFAULT FROM information_schema.COLLATIONS"
                    " WHERE ID IS NOT NULL")
    found = Collations([(text(n), text(c), int(i), text(d or "").lower() == "yes") for n, c, i, d in cur.fetchall()])
    try:  # MariaDB 11.2+: each charset's default collation as the server uses it (utf8mb4=utf8mb4_uca1400_ai_ci)
        cur.execute("SELECT @@global.character_set_collations")
        setting = text(cur.fetchone()[0] or "")
    except Exception:  # no such variable: the table's defaults are the server's
        return found
    for pair in setting.split(","):
        charset, _, collation = pair.strip().partition("=")
        if collation.strip().lower() in found.ids:
            found.defaults[charset_of(charset.strip())] = found.ids[collation.strip().lower()]
    return found
