"""A team's life: setup, launch, growing, membership, removal and shutdown.

Imports: monitor, mail, tasks, record and below.
"""
