"""The turn loop: conversation state, tool dispatch, typed events; no UI and no sub-agents."""
