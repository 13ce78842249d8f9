"""Read-only views of a team: status, collect and wait. They write nothing.

Imports: team and below.
"""
