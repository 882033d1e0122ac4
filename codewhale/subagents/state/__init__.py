"""The sub-agent state file's parts: who owns records, what a valid record is, reading
the file and its journals, and setting damaged files aside."""
