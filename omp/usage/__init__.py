"""What agent CLIs spent, read from their own session records: one reader per CLI."""
