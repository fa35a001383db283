"""``filters.columns``: which columns are excluded, hashed or masked (docs/MASKING.md). A leaf module: the
configuration checks the rules when it loads, the record builder and the snapshot apply them
(records/mask.py)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .codec.table_map import TableMap

ACTIONS = ("exclude", "hash", "mask")


@dataclass
class ColumnRules:
    """``filters.columns``: ``db.table.column`` glob -> exclude | hash | mask; the first matching rule wins."""

    rules: dict[str, str]
    key: bytes = field(default=b"", repr=False)  # HMAC key of ``hash`` (BINLAKE_MASK_KEY); never logged

    def __post_init__(self) -> None:
        for pattern, action in self.rules.items():
            if action not in ACTIONS:
                raise ValueError(f"filters.columns: {pattern}: {action!r} is not one of {', '.join(ACTIONS)}")
            if pattern.count(".") < 2:
                raise ValueError(f"filters.columns: {pattern!r} is not a db.table.column pattern")
        if "hash" in self.rules.values() and not self.key:
            raise ValueError("filters.columns: hash needs a key (mask_key or BINLAKE_MASK_KEY)")

    def for_table(self, tm: TableMap) -> dict[int, str]:
        """Column index -> action for the columns of ``tm`` with a rule (it must carry column names)."""
        prefix = f"{tm.database}.{tm.table}."
        out: dict[int, str] = {}
        for col in tm.columns:
            for pattern, action in self.rules.items():
                if fnmatch.fnmatchcase(prefix + col.name, pattern):
                    out[col.index] = action
                    break
        return out

    def applies_to(self, database: str, table: str) -> bool:
        """Whether some rule names a column of this table (before its column names are known)."""
        return any(fnmatch.fnmatchcase(f"{database}.{table}", p.rsplit(".", 1)[0]) for p in self.rules)
