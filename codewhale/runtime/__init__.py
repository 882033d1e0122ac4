"""The session runtime: one conversation, built in one place, driven through one door.

The TUI and `codewhale exec` call only `open_runtime` and the `Runtime`'s operations.
"""

from codewhale.engine.loop import TurnResult
from codewhale.runtime.build import RuntimeSetupError, open_runtime
from codewhale.runtime.runtime import Runtime, RuntimeRequestError

__all__ = ["Runtime", "RuntimeRequestError", "RuntimeSetupError", "TurnResult", "open_runtime"]
