"""The project's one monitor: its scan loop, decisions, owner lock, liveness, trackers, sweeps,
the usage index and token budgets.

Imports: mail, tasks, record, modes and below.
"""
