"""`omp doctor`: checks of the machine, the project, the agents and the panes.

Imports: api and below.
"""
