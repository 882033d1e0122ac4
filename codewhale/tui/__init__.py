"""The Textual user interface. Nothing outside this package imports Textual."""
