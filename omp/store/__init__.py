"""Files: the map of the state tree (`paths`), safe directories and atomic JSON writes (`fs`),
locks (`locks`), JSONL append under flock and byte-offset readers (`jsonl`)."""
