"""A team's own records: config.json and its history (events.jsonl).

Imports: store and the leaves. Nothing of tasks, mail, tmux or git.
"""
