"""The ``binlake`` command line."""

import gc

# The commands make many small objects (the daemon a tuple or more per row change), nearly all freed by reference
# counting alone: at the cycle collector's default pace (a young collection every 700 allocations, full ones over
# everything alive) it took 10-20% of a start-up's imports and of a stream. Young objects are collected every 50,000
# allocations instead; cycles are still collected, later (a few MiB of young objects at most).
gc.set_threshold(50_000, 20, 100)
