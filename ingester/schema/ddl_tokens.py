"""The DDL parser's tokens (MySQL's lexical rules: quoted names, strings with their escapes, comments,
executable comments) and a cursor over them with the steps every part of the parser takes."""

from __future__ import annotations

import re

from .ddl_operations import Name

_TOKEN = re.compile(r"""
    (?P<ws>\s+|--[ \t][^\n]*|--\n|\#[^\n]*)
  | (?P<vcomment>/\*[M]?!\d*)                     # executable comment: its text is part of the statement
  | (?P<comment>/\*.*?\*/)
  | (?P<vend>\*/)
  | (?P<qid>`(?:[^`]|``)*`)
  | (?P<str>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<word>[A-Za-z0-9_$\u0080-\U0010ffff]+)
  | (?P<op>.)
""", re.X | re.S)
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}


class UnparsedDDL(Exception):
    """A statement that changes tables in a way this parser cannot follow; ``tables`` are the ones it names,
    ``kind`` what the statement is as far as it was read (``create``, ``alter``, ...; "" unknown) and ``replace``
    whether it is a CREATE OR REPLACE."""

    def __init__(self, message: str, tables: list[tuple[str, str]], kind: str = "", replace: bool = False) -> None:
        super().__init__(message)
        self.tables = tables
        self.kind = kind
        self.replace = replace


def tokens(sql: str) -> list[tuple[str, str]]:
    """(kind, text) pairs: word, qid (text unquoted), str (text unescaped), op. Comments are dropped,
    executable comments (``/*!50100 ... */``) kept as the statement they belong to."""
    out: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup
        text = m.group()
        if kind in ("ws", "comment", "vcomment", "vend"):
            continue
        if kind == "qid":
            out.append(("qid", text[1:-1].replace("``", "`")))
        elif kind == "str":
            out.append(("str", _unquote(text)))
        else:
            out.append((kind, text))  # type: ignore[arg-type]
    return out


def default_text(toks: list[tuple[str, str]] | None) -> str | None:
    """A DEFAULT's text as written, a string literal unquoted (``'x'`` -> ``x``); None without one, or NULL."""
    if not toks or (len(toks) == 1 and toks[0] == ("word", "NULL")) or [t.upper() for _, t in toks] == ["NULL"]:
        return None
    if len(toks) == 1 and toks[0][0] == "str":
        return toks[0][1]
    return "".join(text for _, text in toks)


def _unquote(text: str) -> str:
    q, body, out, i = text[0], text[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        elif ch == q and i + 1 < len(body) and body[i + 1] == q:
            out.append(q)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class TokenCursor:
    """A statement's tokens and the position read to; ``fail`` raises UnparsedDDL naming where."""

    def __init__(self, toks: list[tuple[str, str]], default_db: str, sql: str) -> None:
        self.toks = toks
        self.i = 0
        self.db = default_db
        self.sql = sql
        self.names: list[Name] = []  # tables named so far, for error reports
        self.kind = ""  # what the statement is, once known (UnparsedDDL.kind)
        self.replace = False  # CREATE OR REPLACE

    def peek(self, k: int = 0) -> str:
        """The upper-cased word (or op) at i + k; "" for quoted identifiers, strings and the end."""
        j = self.i + k
        if j >= len(self.toks):
            return ""
        kind, text = self.toks[j]
        return text.upper() if kind in ("word", "op") else ""

    def at_end(self) -> bool:
        return self.i >= len(self.toks) or self.peek() == ";"

    def accept(self, *words: str) -> bool:
        """Consume the given words if they come next."""
        if all(self.peek(k) == w for k, w in enumerate(words)):
            self.i += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            self.fail(f"expected {' '.join(words)}")

    def fail(self, what: str) -> None:
        near = " ".join(t for _, t in self.toks[self.i : self.i + 4]) or "the end"
        raise UnparsedDDL(f"{what} near {near!r}", self.names, self.kind, self.replace)

    def ident(self) -> str:
        if self.i >= len(self.toks):
            self.fail("expected a name")
        kind, text = self.toks[self.i]
        if kind not in ("word", "qid") and not (kind == "str" and text):
            self.fail("expected a name")
        self.i += 1
        return text

    def table_name(self) -> Name:
        first = self.ident()
        if self.peek() == ".":
            self.i += 1
            name = (first, self.ident())
        else:
            name = (self.db, first)
        self.names.append(name)
        return name

    def skip_parens(self) -> None:
        """Skip a parenthesised group starting at the current "("."""
        depth = 0
        while self.i < len(self.toks):
            p = self.peek()
            self.i += 1
            if p == "(":
                depth += 1
            elif p == ")":
                depth -= 1
                if depth == 0:
                    return
        self.fail("unbalanced parentheses")

    def skip_item(self) -> None:
        """Skip to the "," or ")" that ends the current item (not consumed), over nested parentheses."""
        while not self.at_end() and self.peek() not in (",", ")"):
            if self.peek() == "(":
                self.skip_parens()
            else:
                self.i += 1

    def number(self) -> int:
        text = self.ident()
        if not text.isdigit():
            self.fail("expected a number")
        return int(text)

    def wait(self) -> None:
        if self.accept("WAIT"):
            self.i += 1
        else:
            self.accept("NOWAIT")

    def end(self) -> None:
        if not self.at_end():
            self.fail("unexpected text")
