"""Versioned ids, lazy entry points, and built-ins registered the same way as outside plugins."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from lle import registry
from lle.errors import RegistryError
from lle.store import Store


def test_builtins_come_from_the_entry_point_group(tmp_path: Path) -> None:
    spec = registry.spec("store/sqlite-v1")
    assert spec.source == "entry-point:lle" and spec.entry_point == "lle.store:Store"
    with registry.make("store/sqlite-v1", path=tmp_path / "x.db") as db:
        assert isinstance(db, Store)
    assert "store/sqlite-v1" in registry.ids("store/")


def test_register_loads_lazily_and_make_passes_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "lle_test_plugin_mod.py"
    module.write_text(textwrap.dedent("""
        LOADED = True
        def make_counter(start=0):
            return {"count": start}
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.register("test/counter-v1", "lle_test_plugin_mod:make_counter", replace=True)
    assert "lle_test_plugin_mod" not in sys.modules  # nothing imported until make()
    assert registry.make("test/counter-v1", start=3) == {"count": 3}
    assert "lle_test_plugin_mod" in sys.modules


@pytest.mark.parametrize("bad", ["keys", "toy/keys", "Toy/keys-v1", "toy/keys-v", "toy/keys-vx", "/keys-v1"])
def test_malformed_ids_are_refused_with_the_expected_shape(bad: str) -> None:
    with pytest.raises(RegistryError, match="family/name-vN"):
        registry.register(bad, "os:getcwd")


def test_taken_ids_need_a_new_version_or_replace() -> None:
    registry.register("test/taken-v1", "os:getcwd", replace=True)
    with pytest.raises(RegistryError, match="bump the version"):
        registry.register("test/taken-v1", "os:getcwd")


def test_unknown_and_broken_entries_say_what_to_do() -> None:
    with pytest.raises(RegistryError, match="store/sqlite-v1"):
        registry.make("store/sqlite-v9")
    registry.register("test/broken-v1", "no_such_module_xyz:thing", replace=True)
    with pytest.raises(RegistryError, match="failed to load"):
        registry.make("test/broken-v1")


def test_a_class_whose_id_differs_from_its_registered_id_fails_at_load_naming_both() -> None:
    from lle.worlds.toy import KeysFamily

    registry.register("test/keys-elsewhere-v1", KeysFamily, replace=True)
    with pytest.raises(RegistryError, match=r"test/keys-elsewhere-v1.*'toy/keys-v1'.*must be equal"):
        registry.spec("test/keys-elsewhere-v1").load()
    assert registry.spec("toy/keys-v1").load() is KeysFamily
