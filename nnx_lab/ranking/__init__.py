"""Ranking and retrieval evaluation (§3.7): issue 26."""
