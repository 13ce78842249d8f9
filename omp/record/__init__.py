"""A team's own records: config.json, its history (events.jsonl), the token budgets it
crossed (budget.json), and the workspace its workers work in as config.json records it
(`workspace.py`).

Imports: store and the leaves. Nothing of tasks, mail, tmux or git.
"""
