"""omp: a leader/worker runtime for terminal coding agents on tmux."""

__version__ = "0.1.0"
