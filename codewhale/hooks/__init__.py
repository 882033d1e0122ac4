"""Lifecycle hooks in Claude Code's format: the user's own programs run at named moments
(before a tool call, after it, when a turn ends, …) with the moment's JSON on stdin.

See docs/HOOKS.md. Nothing here knows the engine: the engine asks `Hooks.run` and reads
the `HookVerdict` it gets back.
"""
