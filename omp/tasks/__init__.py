"""Work: the task store, task conversations and presence (who is there, who is free), and a
worktree worker's handover (`handover.py`: its work committed).

Imports: record, workspace (git: handover.py alone), store and the leaves.
"""
