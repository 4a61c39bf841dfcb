"""lle's own SQL lives in `lle.store`, behind named functions: nothing else speaks SQL to the store,
nor reaches into the store's private members. The SQL worlds own their task databases and are exempt."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "lle"
EXEMPT = ("store", "worlds/sql")

# A statement's first words, so prose ("Update carriers…", "select the…") does not count.
SQL = re.compile(
    r"^\s*(SELECT\b.*\bFROM\b|SELECT\s+[\d?*(]|INSERT\s+(OR\s+\w+\s+)?INTO\b|UPDATE\s+\w+\s+SET\b|DELETE\s+FROM\b"
    r"|CREATE\s+(TEMP\w*\s+|UNIQUE\s+|VIRTUAL\s+)?(TABLE|INDEX|VIEW|TRIGGER)\b|DROP\s+(TABLE|INDEX|VIEW|TRIGGER)\b"
    r"|ALTER\s+TABLE\b|PRAGMA\s+\w+|WITH\s+(RECURSIVE\s+)?\w+(\s*\([^)]*\))?\s+AS\s*\("
    r"|(BEGIN|COMMIT|END)\s+(IMMEDIATE|EXCLUSIVE|DEFERRED|TRANSACTION)\b|ROLLBACK\s+TO\b|SAVEPOINT\s+\w+\s*;?\s*$"
    r"|(?-i:BEGIN|COMMIT|ROLLBACK)\s*;?\s*$)",  # bare, only in capitals: "begin" is a message kind too
    re.IGNORECASE | re.DOTALL,
)
CONNECTION = re.compile(r"(^|_)(conn|connection|cursor|db|store)$")
STORE_PRIVATE = {"_write", "_load", "_dump", "_index", "_insert_step", "_insert_evidence", "_insert_experience",
                 "_applied_version", "_migrate"}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _text(node: ast.AST) -> str | None:
    """A string literal's text (an f-string's literal parts, its fields as `?`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "?" for v in node.values)
    return None


def offences(source: str, name: str) -> list[str]:
    """`name:line: why` for each SQL literal, `.execute(` on a connection or private store access."""
    tree = ast.parse(source)
    docstrings, inner = _docstrings(tree), {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)
                                            for v in n.values}
    out = []
    for node in ast.walk(tree):
        text = _text(node)
        if text is not None and id(node) not in docstrings | inner and SQL.match(text):
            out.append(f"{name}:{getattr(node, 'lineno', 0)}: SQL outside lle.store: {text.strip()[:60]!r}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in {"execute", "executemany", "executescript", "cursor"}:
            receiver = ast.unparse(node.func.value).rsplit(".", 1)[-1]
            first = node.args[0] if node.args else None
            if CONNECTION.search(receiver) or (first is not None and _text(first) is not None):
                out.append(f"{name}:{node.lineno}: {ast.unparse(node.func)}(…) outside lle.store")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = ast.unparse(node.value).rsplit(".", 1)[-1]
            if CONNECTION.search(owner) or (node.attr in STORE_PRIVATE and owner not in {"self", "cls"}):
                out.append(f"{name}:{node.lineno}: private store member {ast.unparse(node)}")
    return out


def test_no_sql_and_no_private_store_access_outside_the_store() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if not relative.startswith(tuple(e + "/" for e in EXEMPT)):
            found += offences(path.read_text(), f"src/lle/{relative}")
    assert not found, "move these into a repository in lle.store:\n" + "\n".join(found)


def test_the_scan_catches_each_kind_of_offence() -> None:
    snippet = '''
def carrier(store, ids, other):
    """Select the items; update them. (prose, not SQL)"""
    note = "Update carriers, from most to least revocable."
    rows = store.conn.execute("SELECT id FROM carrier_items WHERE carrier=?", ("memory",))
    other.execute(f"insert into t(a) values ({ids})")
    sql = """
        UPDATE experiences SET outcome = 'pass'"""
    with store._write():
        store._dump(rows)
    self.store._load("{}")
    reader._load()  # a private member of the store under any name
    return "PRAGMA integrity_check", "BEGIN IMMEDIATE", "with x as (select 1) select * from x", "begin", self._index()
'''
    found = offences(snippet, "snippet.py")
    lines = sorted({int(f.split(":")[1]) for f in found})
    assert lines == [5, 6, 7, 9, 10, 11, 12, 13], found
    assert sum("SQL outside" in f for f in found) == 6 and sum("private" in f for f in found) == 4, found
    assert all(f.startswith("snippet.py:") for f in found)
