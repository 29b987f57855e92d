"""Serving a (pruned) model in llama.cpp, in this process, on the library the PyPI package
``xllamacpp`` ships. Imported only where a chapter or test writes or serves a file
(``import helpers.heads`` loads none of it).

* gguf_export.py: a (pruned) Llama written as a GGUF file llama.cpp loads (``export_gguf``;
  per-layer head counts through its ``deci`` architecture; weights in f32, f16, q8_0 or q4_0);
  it imports ``gguf`` only when called;
* llama_cpp.py: llama.cpp's server (``LlamaCpp``): greedy tokens, forced-token
  log-probabilities, speed, the KV cache it allocates (chapter 13);
* llama_api.py: llama.cpp's C API through ``ctypes`` (``LlamaModel``, ``LlamaContext``): every
  position's logits in one pass, KV-cache types for keys and values apart, the rotation before a
  quantized cache, the weights' bytes (chapter 14b).
"""
