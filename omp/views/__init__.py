"""Read-only views of a team: status, collect, wait, usage and workers' branches (`omp team
diff`). They write nothing.

Imports: team and below.
"""
