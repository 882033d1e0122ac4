"""OpenAI-compatible chat-completions providers.

Kept import-light: the client (its HTTP transport and stream parsing) lives in
`codewhale.providers.client`.
"""
