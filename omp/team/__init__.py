"""A team's life: setup, launch, growing, membership, removal and shutdown; workers' worktrees
in it (`worktrees.py`) and merging their branches back (`merging.py`).

Imports: monitor, mail, tasks, record and below.
"""
