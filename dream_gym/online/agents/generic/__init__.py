"""A no-LLM agent for any program: seeded local edits of the parent's text, as an LLM's small changes.

:class:`GenericAgent` writes a child of any Python program without knowing its task. It reads the
parent as text (never running it) and makes a seeded number of edits (most children one or two;
one more when the parent scores 0) inside the ``EVOLVE-BLOCK-START`` / ``EVOLVE-BLOCK-END``
regions (the whole file when there are none), each one of:

* ``number``: a numeric literal scaled (a factor around 1) or shifted by a step of its own
  magnitude (``1000`` moves by hundreds, ``0.7`` by hundredths); an int stays an int, a positive
  value stays positive; indices (``x[0]``), ``axis=`` arguments and an array's shape
  (``np.zeros((n, 2))``, ``.random(shape)``, ``reshape``, ``shape=``; ``n = 11`` too when ``n`` is
  read only as the shape of an array of one value) are left alone; when a program
  the prompt shows differs from the parent in that literal only, the literal more often moves
  away from a worse program's value or to and past a better one's (the history's momentum), and
  is mostly left alone when that program failed;
* ``bound``: a loop or range limit nudged: an int argument of ``range(...)`` or an int compared in
  a ``while``/``if`` test moved by a step or so, another ``range`` argument given ``+ 1``/``- 1``;
* ``compare``: a comparison loosened or tightened (``<`` and ``<=``, ``>`` and ``>=``);
* ``swap``: a call of the min/max family turned into its mirror (``min``/``max``,
  ``argmin``/``argmax``, ``minimum``/``maximum``, ``floor``/``ceil``, ...);
* ``statement``: a simple statement duplicated, deleted or moved past its neighbour in its block
  (no copy of a plain ``x = value``, whose first copy would be dead; no deletion of the first
  store of a name, which would leave its readers with an undefined name);
* ``string``: a string literal replaced by a sibling: another quoted word of a bracketed list (in
  the code or a comment) that holds the literal (the options a program lists for a setting);
  values a worse, failed or equally scored shown program tried there are not tried again;
* ``crossover``: a piece of another program of the prompt (an inspiration, a top program) scored
  at least as well as the parent, above 0 and not failed: a function of the same name, or one
  differing block of lines of the two programs' regions;
* ``array``: an array of one value (``np.zeros(shape)``, ``np.ones``, ``np.full``, ``np.empty``)
  becomes that value plus a small seeded random array of the same shape, in [0, scale), plain or
  sorted along its rows (rising or falling) or its columns (:data:`FILLS`): a program whose answer
  is all one value, every point at the origin, scores nothing; one that differs can. This edit is
  the child's only one; a parent that scores 0 draws it twice as often as all other kinds together.

What the prompt shows steers the edits (:mod:`dream_gym.online.agents.generic.history`): a shown
program whose evaluation failed (the prompt shows its ``error``) is no crossover source, and a
child whose change has the form of that program's change (its lines, numbers masked) is mostly not
written again; an assignment the same block replaces before reading it (a dead copy) is no edit
site.

Edit sites come from :mod:`ast` and :mod:`tokenize`; every edit replaces a span of the source text,
so the rest of the file keeps its formatting. After each edit the child must still compile
(nothing is run) and must not undo an earlier edit, and a child changes each string literal,
comparison or mirrored call once (a second edit there would overwrite or undo the first; a number
may move twice, the two steps making one bigger step); an edit that breaks it is dropped and another
tried, a bounded number of times; a text equal to a program the prompt shows is only a step. The
same parent, donors, parent score and generator give the same child.
"""

from __future__ import annotations

from .agent import EDIT_WEIGHTS, EDITS, GenericAgent
from .numeric import FILLS
from .prompt import generic_seed, prompt_donors
from .source import Donor, Edit, Pool, Source, compiles, evolve_regions

__all__ = ["EDITS", "EDIT_WEIGHTS", "FILLS", "Donor", "Edit", "GenericAgent", "Pool", "Source", "compiles",
           "evolve_regions", "generic_seed", "prompt_donors"]
