"""The project's one monitor: its scan loop, decisions, owner lock, liveness, trackers, sweeps,
the usage index, token budgets and the checks of completions a team verifies (`verifying.py`).

Imports: mail, tasks, record, modes and below.
"""
