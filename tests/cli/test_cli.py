"""The CLI end to end in real processes: listings, JSON, and bad input that never touches the store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lle.store import Store


def lle(workspace: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), *args],
                          capture_output=True, text=True, input=stdin, timeout=60)


def snapshot(workspace: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(workspace.glob("lle.db*"))}


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in result.stderr


@pytest.fixture
def workspace(tmp_path: Path, make_experience) -> Path:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    with Store(ws / "lle.db") as db:
        db.append_experiences([make_experience(), make_experience(project="library")])
    return ws


def test_version_path_and_schema(workspace: Path) -> None:
    assert lle(workspace, "--version").stdout.startswith("lle ")
    assert lle(workspace, "store", "path").stdout.strip() == str((workspace / "lle.db").resolve())
    sql = lle(workspace, "store", "schema").stdout
    assert "CREATE TABLE experiences" in sql and "experiences_no_update" in sql
    schema = json.loads(lle(workspace, "schema", "Experience").stdout)
    assert schema["properties"]["steps"]["description"] == "The trajectory."
    assert "Step" in lle(workspace, "schema").stdout.split()


def test_list_show_export_import_revoke(workspace: Path, tmp_path: Path) -> None:
    rows = json.loads(lle(workspace, "experiences", "list", "--json").stdout)
    assert [r["project"] for r in rows] == ["shop", "library"]
    shown = lle(workspace, "experiences", "show", rows[0]["id"])
    assert "requested  run_query" in shown.stdout and "executed   as requested" in shown.stdout
    exported = lle(workspace, "experiences", "export").stdout
    other = tmp_path / "other"
    imported = lle(other, "experiences", "import", "-", stdin=exported)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(lle(other, "experiences", "list", "--json").stdout) == rows
    revoked = lle(workspace, "revoke", rows[0]["id"], "--reason", "world bug", "--author", "ci")
    assert revoked.returncode == 0 and "rev_" in revoked.stdout
    rows_after = json.loads(lle(workspace, "experiences", "list", "--json").stdout)
    assert [r["revoked"] for r in rows_after] == [True, False]
    assert json.loads(lle(workspace, "updates", "list", "--json").stdout) == []
    check = json.loads(lle(workspace, "store", "check", "--json").stdout)
    assert check["integrity"] == "ok" and check["rows"]["revocations"] == 1


def test_unknown_id(workspace: Path) -> None:
    before = snapshot(workspace)
    assert_one_line_error(lle(workspace, "experiences", "show", "exp_nope"), "exp_nope", "lle experiences list")
    assert_one_line_error(lle(workspace, "revoke", "exp_nope", "--reason", "x"), "exp_nope")
    assert snapshot(workspace) == before


@pytest.mark.parametrize("content, needle", [
    ('{"small_world": ', "line 1"),
    ('{"id": "exp_1"}\n{not json}\n', ":2"),
    ('[{"policy": {"model": "x"}}]', "small_world"),
])
def test_malformed_import(workspace: Path, tmp_path: Path, content: str, needle: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    before = snapshot(workspace)
    assert_one_line_error(lle(workspace, "experiences", "import", str(bad)), str(bad), needle)
    assert snapshot(workspace) == before


def test_truncated_database(workspace: Path) -> None:
    db = workspace / "lle.db"
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])
    before = snapshot(workspace)
    assert_one_line_error(lle(workspace, "experiences", "list"), str(db), "truncated")
    assert snapshot(workspace) == before


@pytest.mark.parametrize("content", [b"hello, this is a text file\n" * 10, b"SQLite format 3\x00" + b"\x00" * 10])
def test_foreign_file_as_database(tmp_path: Path, content: bytes) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "lle.db").write_bytes(content)
    assert_one_line_error(lle(ws, "experiences", "list"), str(ws / "lle.db"), "--workspace")
    assert (ws / "lle.db").read_bytes() == content


def test_another_programs_sqlite_database(tmp_path: Path) -> None:
    import apsw

    ws = tmp_path / "ws"
    ws.mkdir()
    conn = apsw.Connection(str(ws / "lle.db"))
    conn.execute("CREATE TABLE invoices(id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices VALUES (1, 9.5)")
    conn.close()
    before = snapshot(ws)
    assert_one_line_error(lle(ws, "experiences", "list"), "another program", "invoices")
    assert snapshot(ws) == before


def test_newer_schema_refuses_writes(workspace: Path, tmp_path: Path) -> None:
    with Store(workspace / "lle.db") as db:
        db.conn.execute("INSERT INTO lle_migrations VALUES (999, 'future', 'later')")
        exp_id = db.list_experiences()[0].id
    before = snapshot(workspace)
    assert lle(workspace, "experiences", "show", exp_id).returncode == 0  # reading still works
    assert_one_line_error(lle(workspace, "revoke", exp_id, "--reason", "x"), "newer lle", "upgrade")
    assert snapshot(workspace) == before
