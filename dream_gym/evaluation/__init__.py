"""Offline evaluation: episodes of many policies on many worlds, their journal, the leaderboard, result
rows, plots and world specs."""
