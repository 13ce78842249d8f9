"""The domain: team config, mailbox, tasks, launch, status, monitor."""
