"""The layout of :mod:`dream_gym.replay.engine`'s episode state, in one place.

The engine (numba) and :class:`dream_gym.envs.env.ReplayEnv` (Python, on its hot path) read and
write the same flat arrays; both take the slots' names from here, so that importing the env does
not load numba and no offset is written twice. tests/test_env_engine.py pins the layout.
"""

from __future__ import annotations

# Few array arguments keep the call's own cost (numba checks the type of every argument) well
# below a microsecond.
#
# S (int64): a header of scalars, then sections (offsets in the header): the batch, the output
# (kept selections, their new nodes' world indices, the frontier or its changes), per buffer set
# its (rows written, episode), per observed id (world index, parent id, revealed children, open
# flag), the open non-root ids as a list linked in ascending order (next and previous id; id 0,
# the root, is the list's head), a scratch mark per observed id, the world's arrays (children CSR,
# depth, validity), and F, read as float64: value, reward, best q, beta1, beta2, baseline, the
# world's scores and q.
# A buffer set is one block of bytes holding the observation's nodes (int32), score and globals
# (float64) and the action mask (int8) at the offsets set_layout gives.
H_STATUS, H_N, H_K, H_FIRST, H_OBSERVED, H_ROUNDS, H_ROOT_SLOTS, H_FC = range(8)
H_DST, H_EPOCH, H_W, H_M, H_LEAVES, H_ROUND_LIMIT, H_ROWS_SAFE = range(8, 15)
H_OUTLEN, H_MODE, H_ROOT_CHILDREN, H_O_F, H_NF = range(16, 21)
H_B_SCORES, H_B_GLOBALS, H_B_MASK = range(35, 38)  # byte offsets in a buffer set (its nodes at 0)
H_MAX_ATTEMPTS, H_REFUSED = 38, 39  # the attempts limit; the size of the batch it refused (0: none)
# Request mode (1: the online frontier, selections the record cannot answer refused); the episode's
# refusals so far; the step's refusals (their ids in the "refused" section); that section's offset.
H_REQUESTS, H_REFUSALS, H_STEP_REFUSED, H_O_REFUSED = 15, 21, 40, 41
H_O_BATCH, H_O_OUT, H_O_SETS, H_O_ORDER, H_O_PARENT, H_O_REVEALED, H_O_OPEN, H_O_NEXT = range(22, 30)
H_O_CSTART, H_O_NCH, H_O_CHILDREN, H_O_DEPTH, H_O_VALID = range(30, 35)
# The scratch marks (one per observed id) and the stamp of the call that marks them; the open
# list's previous ids (its next ids: H_O_NEXT).
H_STAMP, H_O_MARK, H_O_PREV = 42, 43, 44
HEADER_SIZE = 45
F_VALUE, F_REWARD, F_BEST_Q, F_BETA1, F_BETA2, F_BASELINE = range(6)
F_HEADER_SIZE = 8
F_O_SCORE = F_HEADER_SIZE
STATUS_APPLIED, STATUS_ILLEGAL, STATUS_EMPTY, STATUS_REFUSED, STATUS_CUT = 0, 1, 2, 3, 4
MODE_STEP, MODE_RESET = 0, 1
MAX_SETS = 4  # observation buffer sets an env keeps
# The output starts with these, then the kept selections, their nodes, and either the changes that
# bring the frontier of the buffer set written (as of the rows it held) to the step's: the
# OUT_REMOVED non-root ids that left it, then the ids that joined it, ascending; or (OUT_REMOVED
# -1: the set held another episode, or the frontier is hardly longer than its changes) the whole
# frontier, the root first when it may open a branch. The root's multiplicity is OUT_ROOT_SLOTS.
OUT_K, OUT_FIRST, OUT_ROOT_SLOTS, OUT_ROUNDS, OUT_END, OUT_REMOVED = range(6)  # OUT_END: 0 running,
OUT_HEADER = 6       # 1 terminated, 2 truncated (rounds), 3 capacity full, 4 max_attempts, 5 cut short
                     # (request mode: the record could answer none of the batch's selections)
# OUT_END's values: how a step ended the episode (every value from END_TRUNCATED on truncates it).
END_RUNNING, END_TERMINATED, END_TRUNCATED, END_FULL, END_LIMIT, END_RECORD = range(6)
