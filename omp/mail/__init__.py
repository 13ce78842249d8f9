"""Mail and its delivery: mailboxes, loop limits, message events, the texts agents read,
the unread-count nudge and typing one line into a pane.

Imports: tasks, record, agents, tmux, store and the leaves. Never the monitor: a send that finds
no monitor says so in its outcome, and the pipeline above starts one.
"""
