"""OpenAI-compatible chat-completions providers.

Kept import-light: the client (which needs httpx) lives in `codewhale.providers.client`.
"""
