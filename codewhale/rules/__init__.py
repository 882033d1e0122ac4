"""Lasting permission rules (allow / ask / deny) in Claude Code's syntax, from config files.

`rule` parses and matches one rule, `shell_parts` and `path_patterns` hold the two hard
matchers, `sources` reads and edits the files rules come from, `ruleset` decides a call.
"""
