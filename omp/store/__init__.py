"""Files: safe directories, atomic JSON writes, JSONL append under flock, byte-offset readers."""
