"""`omp team api`: the operations, their declarations, their docs, and the send pipeline.

Imports: views and below.
"""
