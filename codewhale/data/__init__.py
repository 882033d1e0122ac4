"""Packaged prompts and built-in agent definitions."""
