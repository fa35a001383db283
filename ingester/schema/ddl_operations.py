"""What a DDL statement does to tables, as the parser (ddl.py) gives it: one dataclass per operation
(CREATE TABLE, ALTER TABLE with its clauses, RENAME, DROP, TRUNCATE, a database's charset)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .table_schema import ColumnDef, Index, TableSchema

Name = tuple[str, str]  # (database, table)
Position = tuple[str, str] | None  # None: at the end; ("first", ""), ("after", column)


@dataclass
class AddColumn:
    column: ColumnDef
    position: Position = None
    if_not_exists: bool = False


@dataclass
class DropColumn:
    name: str
    if_exists: bool = False


@dataclass
class ChangeColumn:  # CHANGE and MODIFY (old name == new name)
    old: str
    column: ColumnDef
    position: Position = None
    if_exists: bool = False


@dataclass
class RenameColumn:
    old: str
    new: str


@dataclass
class ColumnDefault:  # ALTER [COLUMN] c SET DEFAULT x | DROP DEFAULT
    name: str
    default: list[tuple[str, str]] | None  # None: dropped


@dataclass
class TableCharset:  # [DEFAULT] CHARACTER SET / COLLATE: the default of columns added later
    charset: str | None  # None: the database's default
    collation: str | None = None  # COLLATE's name (None: the charset's default)


@dataclass
class TableComment:  # COMMENT [=] 'text'
    comment: str


@dataclass
class ConvertCharset:  # CONVERT TO CHARACTER SET: every text column, and the table's default
    charset: str | None  # None: the database's default
    collation: str | None = None  # COLLATE's name (None: the charset's default)


@dataclass
class AddPrimaryKey:
    columns: list[str]
    prefixes: dict[str, int] = field(default_factory=dict)  # lower-cased column -> prefix length, where indexed by one


@dataclass
class DropPrimaryKey:
    pass


@dataclass
class AddIndex:  # [UNIQUE|FULLTEXT|SPATIAL] INDEX, a column's UNIQUE, a FOREIGN KEY's own index
    index: Index
    if_not_exists: bool = False


@dataclass
class DropIndex:  # DROP INDEX|KEY|CONSTRAINT name
    name: str
    constraint: bool = False  # DROP CONSTRAINT: the name may be a CHECK's or a FOREIGN KEY's, whose index stays


@dataclass
class RenameIndex:
    old: str
    new: str


AlterSpec = (AddColumn | DropColumn | ChangeColumn | RenameColumn | ColumnDefault | AddPrimaryKey | DropPrimaryKey
             | TableCharset | ConvertCharset | AddIndex | DropIndex | RenameIndex | TableComment)


@dataclass
class CreateTable:
    name: Name
    schema: TableSchema  # its charset: the table option's (None: the database's default); columns unresolved
    if_not_exists: bool = False
    replace: bool = False  # CREATE OR REPLACE (MariaDB): the table of that name, if any, dropped first


@dataclass
class CreateTableLike:
    name: Name
    source: Name
    if_not_exists: bool = False
    replace: bool = False


# Partition maintenance's actions (ALTER TABLE ... <ACTION> PARTITION ...), as table statement entries name them.
# "repartition" is PARTITION BY, "remove" REMOVE PARTITIONING; "convert_to_table" MariaDB's CONVERT PARTITION p TO
# TABLE t2 (the partition's rows become table t2), "convert_from_table" CONVERT TABLE t2 TO PARTITION p (t2's rows
# become partition p; t2 is gone). ANALYZE, CHECK, OPTIMIZE and REPAIR PARTITION change nothing: no Partition.
PARTITION_ACTIONS = ("truncate", "drop", "exchange", "reorganize", "coalesce", "add", "remove", "rebuild",
                     "repartition", "discard", "import", "convert_to_table", "convert_from_table")


@dataclass
class Partition:
    action: str  # one of PARTITION_ACTIONS
    names: list[str] = field(default_factory=list)  # the partitions named ([]: ALL, or none named)
    with_table: Name | None = None  # EXCHANGE's and CONVERT's other table
    count: int | None = None  # COALESCE PARTITION n, ADD PARTITION PARTITIONS n


@dataclass
class AlterTable:
    name: Name
    specs: list[AlterSpec]
    rename_to: Name | None = None
    partition: Partition | None = None  # partition maintenance (no other clause comes with it)


@dataclass
class RenameTables:
    pairs: list[tuple[Name, Name]]


@dataclass
class DropTables:
    names: list[Name]


@dataclass
class DropDatabase:
    database: str


@dataclass
class DatabaseCharset:  # CREATE DATABASE, ALTER DATABASE: the default of tables created later
    database: str
    charset: str | None  # None: the server's default (CREATE without a charset); ALTER without one is no op
    create: bool = False
    if_not_exists: bool = False
    collation: str | None = None  # COLLATE's name (None: the charset's default)


@dataclass
class TruncateTable:  # rows go, columns stay
    name: Name


Operation = (CreateTable | CreateTableLike | AlterTable | RenameTables | DropTables | DropDatabase | DatabaseCharset
             | TruncateTable)
