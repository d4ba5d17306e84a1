"""A pre-flight check before a long fit (issue 28)."""
