"""The project's one monitor: its scan loop, decisions, owner lock, liveness, trackers, sweeps.

Imports: mail, tasks, record, modes and below.
"""
