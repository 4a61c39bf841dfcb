"""A world written to the previous contract: `split_sizes` an instance method, not a classmethod."""

from __future__ import annotations

from lle_demo_counter import CounterFamily

from lle.core import Split


class OldContractFamily(CounterFamily):
    """The counter world with `split_sizes` as an instance method (the class alone cannot answer it)."""

    id = "demo/old-v1"

    def split_sizes(self) -> dict[Split, int | None]:  # type: ignore[override]
        return dict.fromkeys(Split)
