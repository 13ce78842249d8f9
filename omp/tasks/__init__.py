"""Work: the task store, task conversations and presence (who is there, who is free).

Imports: record, store and the leaves.
"""
