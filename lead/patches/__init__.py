"""Patches of other projects' internals, and only those: each module here changes or reads what a library does not
offer as an interface (a module attribute swapped, a private buffer written, an interpreter internal called).

Every module's docstring starts with the same four lines, so that an upgrade knows what to look at:

- Upstream: the version it was written against (the lock pins it: ``infra/lock/``).
- Why: what goes wrong without it.
- Delete when: the upstream change that makes it unnecessary.
- Contract: the test that fails when upstream moves what it relies on (``tests/contracts/test_patches.py``
  checks that every module here says all four).

Subclassing a library through its documented hooks is no patch and lives with its user (``LEADTrainer``'s
overridden methods are pinned by ``tests/contracts/test_trl_seam.py``).
"""
