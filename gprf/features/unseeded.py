"""Seeds for draws made without ``seed=``: they follow ``torch.manual_seed`` but never advance torch's global generator.

A random-feature model built next to an exact one must not shift the exact model's random stream (initial designs,
acquisition restarts, data splits): a paired comparison of the two needs the same global draws in both runs. So an
unseeded draw reads torch's global CPU generator state without drawing from it, and seeds a private generator from
a digest of that state and of the number of unseeded draws already made from that same state:

* after ``torch.manual_seed(s)`` a script builds the same unseeded features on every run (and different ones for
  another ``s``); two maps built one after the other still draw independently (the count differs);
* the global state, and so everything else the script draws, is the same with or without gprf's draws;
* within one process, seeding torch again does not repeat earlier unseeded draws (the count goes on): pass
  ``seed=`` to rebuild identical features.
"""

from __future__ import annotations

import hashlib
import threading

import torch

_lock = threading.Lock()
_last_state_digest: bytes | None = None
_draws_from_state = 0


def unseeded_seed() -> int:
    """A seed in ``[0, 2**62)`` for a draw made without ``seed=``, derived from torch's global generator state (read,
    not advanced) and the number of earlier such draws from the same state."""
    global _last_state_digest, _draws_from_state
    state_digest = hashlib.blake2b(torch.get_rng_state().numpy().tobytes(), digest_size=16).digest()
    with _lock:
        if state_digest != _last_state_digest:
            _last_state_digest, _draws_from_state = state_digest, 0
        count = _draws_from_state
        _draws_from_state += 1
    seed_digest = hashlib.blake2b(state_digest + count.to_bytes(8, "little"), digest_size=8).digest()
    return int.from_bytes(seed_digest, "little") >> 2


def unseeded_generator() -> torch.Generator:
    """A private CPU generator seeded by :func:`unseeded_seed`."""
    return torch.Generator().manual_seed(unseeded_seed())
