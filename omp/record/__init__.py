"""A team's own records: config.json, its history (events.jsonl) and the token budgets it
crossed (budget.json).

Imports: store and the leaves. Nothing of tasks, mail, tmux or git.
"""
