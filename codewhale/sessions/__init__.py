"""Conversation persistence and resume."""
