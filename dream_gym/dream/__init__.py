"""The dreaming loop (SPEC §8)."""
