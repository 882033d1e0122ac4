"""RLM sessions: a sandboxed Python REPL over long inputs, with sub-LLM helpers."""
