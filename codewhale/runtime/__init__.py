"""The session runtime: one conversation, built in one place, driven through one door.

The TUI and `codewhale exec` call only `open_runtime` and the `Runtime`'s operations.

The names below load on first use (PEP 562): the app's first frame imports
`codewhale.runtime.events`, and importing this package must not pull in the engine,
the provider client and the config models with it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codewhale.engine.loop import TurnResult
    from codewhale.runtime.build import RuntimeSetupError, open_runtime
    from codewhale.runtime.runtime import RlmSummary, Runtime, RuntimeRequestError

__all__ = [
    "RlmSummary",
    "Runtime",
    "RuntimeRequestError",
    "RuntimeSetupError",
    "TurnResult",
    "open_runtime",
]

_HOMES = {
    "RlmSummary": "codewhale.runtime.runtime",
    "Runtime": "codewhale.runtime.runtime",
    "RuntimeRequestError": "codewhale.runtime.runtime",
    "RuntimeSetupError": "codewhale.runtime.build",
    "TurnResult": "codewhale.engine.loop",
    "open_runtime": "codewhale.runtime.build",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        # Also how `from codewhale.runtime import events` finds the submodule instead.
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value
