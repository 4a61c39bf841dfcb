"""lle: agents that learn from their own experience, safely (see DESIGN and docs/)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lle")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+source"
