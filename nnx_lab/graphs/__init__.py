"""Graphs (§2.12, §3.8, §3.9), behind the optional graph extra: issue 26."""
