"""The KV cache of a decoder-only LM, built on ``helpers.heads``: what pruning KV groups saves in
it, and the other ways to shrink it that chapter 14 compares at equal memory.

* cache.py: the cache's bytes, predicted from the (pruned) layers and measured from a cache;
  cached greedy generation and its timing; published configurations' arithmetic;
* selective.py: caches that keep some past positions per KV head (windowed heads, heavy hitters);
* quantized.py: quantized caches (transformers' ``QuantizedCache``) and the bytes any cache holds;
* budget.py: one cache configuration three ways: its bytes, a real cache, a fast twin.
"""
