"""`omp team api`: the operations, their declarations, their docs, the send pipeline, and what a
completion does in a team with worktrees or checks (`completion.py`, imported on that path only).

Imports: views and below.
"""
