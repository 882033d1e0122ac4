"""CodeWhale: a terminal coding agent. Kept import-free so `codewhale --version` starts fast."""

__version__ = "0.1.0"
