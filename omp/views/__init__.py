"""Read-only views of a team: status, collect, wait and usage. They write nothing.

Imports: team and below.
"""
