"""The bottom layer: utilities with no tie to attention heads, shared by every part of
``helpers`` (``heads``, ``zoo``, ``book``) and importing none of them.

* atomic.py: atomic writes (a crash never leaves a half-written file under the final name);
* scratch.py: scratch folders, deleted when the process (a notebook's kernel) exits;
* code_digest.py: digests of what a piece of code computes (cache keys that prose never breaks);
* devices.py: where models and batches live (``default_device``, ``to_device``, ``device_of``);
* cores.py: the CPU cores this process may run on;
* denormals.py: flush-to-zero, called where the book, the benchmarks and the tests start;
* ledger.py: a ledger of the timed blocks of work a run does;
* fairseq_compat.py: importing fairseq 0.12 without letting it reconfigure logging.
"""
