"""The engine: one invocation, from its first input to its last commit (private to the package)."""
