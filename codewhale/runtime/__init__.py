"""The session runtime: one conversation, built in one place, driven through one door.

The TUI and `codewhale exec` call only `open_runtime` and the `Runtime`'s operations.
"""

from codewhale.runtime.build import RuntimeSetupError, open_runtime
from codewhale.runtime.runtime import Runtime, RuntimeRequestError

__all__ = ["Runtime", "RuntimeRequestError", "RuntimeSetupError", "open_runtime"]
