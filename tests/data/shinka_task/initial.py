"""The program of the test task in evaluate.py (ShinkaEvolve's form)."""
# EVOLVE-BLOCK-START
VALUE = 1.0


def run_experiment(seed=0):
    return VALUE


# EVOLVE-BLOCK-END
