"""Short ids (issue 44): an id by a unique prefix, with or without its kind, or by a unique tail of 6 characters
or more; tables print the shortest tail that is found again, and an ambiguous one is one line of candidates."""

from __future__ import annotations

import pytest

from lle.core import new_id
from lle.errors import InvalidInputError, UnknownIdError
from lle.viewer.lookup import by_prefix, short_ids


def find(ref: str, ids: list[str]) -> str:
    return by_prefix("experience", ref, ids, "list them")


def test_a_prefix_with_or_without_the_kind_and_a_tail_find_the_id() -> None:
    ids = [new_id("exp") for _ in range(200)]  # minted in a few milliseconds: they share most characters
    shown = short_ids(ids, ids)
    assert all(len(shown[i]) >= 6 and i.endswith(shown[i]) and find(shown[i], ids) == i for i in ids)
    assert find(ids[7][4:], ids) == ids[7]  # without its kind
    with pytest.raises(UnknownIdError):
        find(ids[7][-5:], ids)  # a tail of 5 is too short to be looked up


def test_colliding_tails_and_heads_get_longer_short_ids() -> None:
    ids = ["exp_01AAAAAAAAAAAAAAAAAAXYZ123", "exp_01BBBBBBBBBBBBBBBBBBXYZ123", "exp_XYZ123CCCCCCCCCCCCCCCC99"]
    shown = short_ids(ids[:2], ids)
    assert shown == {ids[0]: "AXYZ123", ids[1]: "BXYZ123"}
    assert [find(s, ids) for s in shown.values()] == ids[:2]
    with pytest.raises(InvalidInputError) as caught:
        find("XYZ123", ids)  # the tail of two and the head of the third
    message = str(caught.value)
    assert "\n" not in message and "ambiguous" in message and all(i in message for i in ids)
