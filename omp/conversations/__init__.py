"""Task conversations, in one home: a `task_req` and every message of it, the revisioned record
omp keeps of each, and who is free to take one.

- `events`: the event fields of a message (validated before any file is touched) and what omp
  does at send time: auto-acknowledge or reject a request, answer a ping, close a conversation;
- `record`: one revisioned record per conversation (`conversations/<task_id>.json`) and the
  summary of the open ones, published under the team's conversation lock;
- `availability`: each member's status (`available`, `busy`, `inactive`) from the records, the
  claimed tasks and presence.

Above `omp.mail` (it appends through the mailboxes and their limits) and `omp.tasks` (claims and
presence); below the monitor (its sweep), the team's life, the views and the API. A plain
message never loads any of it (`omp.api.send` imports `events` only for a message with event
fields).
"""
