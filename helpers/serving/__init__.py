"""Serving a (pruned) model in llama.cpp, in this process, on the library the PyPI package
``xllamacpp`` ships; the files come from ``helpers.heads.gguf_export``. Imported only where a
chapter or test serves a file (``import helpers.heads`` loads none of it).

* llama_cpp.py: llama.cpp's server (``LlamaCpp``): greedy tokens, forced-token
  log-probabilities, speed, the KV cache it allocates (chapter 13);
* llama_api.py: llama.cpp's C API through ``ctypes`` (``LlamaModel``, ``LlamaContext``): every
  position's logits in one pass, KV-cache types for keys and values apart, the rotation before a
  quantized cache, the weights' bytes (chapter 14b).
"""
