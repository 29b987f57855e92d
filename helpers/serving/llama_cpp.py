"""Run a GGUF file (``gguf_export``) in llama.cpp, in this process, through the PyPI package
``xllamacpp`` (prebuilt CPU wheels of llama.cpp's server, no compiler): greedy tokens, per-token
log-probabilities, prompt and generation speed, and the KV cache llama.cpp allocates.

Two settings (``RuntimeSettings``):

* ``exact=True``: flash attention off and a float32 KV cache. With a float32 file, llama.cpp then
  computes what transformers computes in float32, to rounding (log-probabilities within about
  1e-3 nats; greedy tokens equal wherever the top two logits are not within that rounding).
* ``exact=False``: llama.cpp's defaults, flash attention chosen by llama.cpp and a float16 KV
  cache (half the bytes): faster, and near-ties may then resolve to other tokens.

A token's log-probability is read by forcing it: the prompt is the text before it, the token gets
a logit bias that makes greedy sampling pick it, and the server reports its log-probability under
the model's own logits (the bias acts in the sampler, after them; llama.cpp's server computes the
reported probabilities from the logits before sampling, unless ``post_sampling_probs`` is asked
for; tests/test_llama_cpp.py would catch a server version where the bias leaked into them).
While a server runs, this process's C-level stderr is its log file (Python's tracebacks reach the
caller as exceptions); servers opened inside one another restore it in reverse order. The prompt cache makes each such
request one new position, so scoring ``n`` tokens costs ``n`` single-token passes.

The KV cache's size is read from llama.cpp's log line ``llama_kv_cache: size = ... MiB (N cells,
...)``, printed to 0.01 MiB; ``predicted_kv_bytes`` is the arithmetic it is compared with. Without
flash attention llama.cpp pads every layer's value cache to the widest layer's when layers differ
(its log says so), so the values shrink only to the widest layer's width; with flash attention it
pads nothing.

    with LlamaCpp("pruned.gguf", RuntimeSettings(threads=2)) as run:
        tokens = run.greedy(prompt_ids, 64)
        speed = run.timed(prompt_ids, 64)        # prompt and generation tokens per second
        run.kv_mib, run.cells, run.flash_attention   # the cache as llama.cpp allocated it
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

KV_LINE = re.compile(
    r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers.*"
    r"K \((\w+)\):\s*([\d.]+) MiB, V \((\w+)\):\s*([\d.]+) MiB"
)
_LOADED_LINE = "init: model loaded"  # logged after the cache and the attention kernels are chosen
FLASH_ON = "Flash Attention enabled"
_FORCE = 1.0e4  # a logit bias no competing logit overcomes
_LOG_VERBOSITY = 4  # llama.cpp's model and cache lines are logged from this level


class LlamaCppError(RuntimeError):
    """llama.cpp refused the file, or its log did not say what was asked of it."""


@dataclass(frozen=True)
class RuntimeSettings:
    """How llama.cpp runs a file: ``threads`` for prompts and generation, ``context`` cells in the
    KV cache, and ``exact`` (flash attention off, float32 cache) or llama.cpp's defaults."""

    threads: int = 1
    context: int = 2048
    exact: bool = True


def _require_xllamacpp():
    try:
        import xllamacpp
    except ImportError as err:  # pragma: no cover - installed by `make setup`
        raise ImportError(
            "running GGUF files needs the PyPI package xllamacpp (pinned in pyproject.toml): run "
            "`make setup`, or `pip install xllamacpp gguf`"
        ) from err
    return xllamacpp


class LlamaCpp:
    """One llama.cpp server in this process for one GGUF file; a context manager. llama.cpp's log
    (its C stderr) goes to a file while it runs, read for the KV cache and kept as ``log``."""

    def __init__(self, path: str | os.PathLike, settings: RuntimeSettings = RuntimeSettings()):
        self.path, self.settings = Path(path), settings
        if not self.path.exists():
            raise FileNotFoundError(
                f"{self.path} does not exist: write it with helpers.serving.gguf_export.export_gguf"
            )
        self.server = None
        self.log = ""

    def __enter__(self) -> LlamaCpp:
        x = _require_xllamacpp()
        params = x.CommonParams()
        params.model.path = str(self.path)
        params.n_ctx, params.n_parallel, params.warmup, params.verbosity = (
            self.settings.context,
            1,
            False,
            _LOG_VERBOSITY,
        )
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = self.settings.threads
        cache = x.ggml_type.GGML_TYPE_F32 if self.settings.exact else x.ggml_type.GGML_TYPE_F16
        params.cache_type_k = params.cache_type_v = cache
        flash = x.llama_flash_attn_type
        params.flash_attn_type = (
            flash.LLAMA_FLASH_ATTN_TYPE_DISABLED if self.settings.exact else flash.LLAMA_FLASH_ATTN_TYPE_AUTO
        )
        self._log_file = tempfile.NamedTemporaryFile(prefix="llama_cpp_", suffix=".log", delete=False)
        sys.stderr.flush()  # what Python has buffered goes where it was meant to, not into the log
        self._saved_stderr = os.dup(2)
        os.dup2(self._log_file.fileno(), 2)
        try:
            self.server = x.Server(params)
            self._complete({"prompt": [0], "n_predict": 1, "temperature": 0.0, "cache_prompt": False})  # a server
            # closed before its first request can hang; this one also warms it up
            self._read_kv_line()
        except BaseException as err:
            self.__exit__(None, None, None)
            if isinstance(err, RuntimeError) and not isinstance(err, LlamaCppError):  # xllamacpp's "Failed to
                errors = [line for line in self.log.splitlines() if " E " in line or "error" in line.lower()]  # init
                raise LlamaCppError(
                    f"llama.cpp could not load {self.path}: {err}\n" + "\n".join(errors[-10:])
                ) from err
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.server = None  # the server stops and frees the model here
        if getattr(self, "_saved_stderr", None) is not None:
            sys.stderr.flush()
            os.dup2(self._saved_stderr, 2)
            os.close(self._saved_stderr)
            self._saved_stderr = None
            self._log_file.close()
            self.log = Path(self._log_file.name).read_text(errors="replace")
            os.unlink(self._log_file.name)

    def _read_kv_line(self, wait: float = 5.0) -> None:
        """Set ``kv_mib`` (keys and values, as printed: 0.01 MiB), ``k_mib``, ``v_mib``, ``cells``,
        ``cache_type`` and ``flash_attention`` from llama.cpp's log, which a thread of its own writes."""
        deadline = time.monotonic() + wait
        while True:
            text = Path(self._log_file.name).read_text(errors="replace")
            found = KV_LINE.search(text)
            if found and _LOADED_LINE in text:
                total, cells, _, kind, k, _, v = found.groups()
                self.kv_mib, self.k_mib, self.v_mib = float(total), float(k), float(v)
                self.cells, self.cache_type, self.flash_attention = int(cells), kind, FLASH_ON in text
                return
            if time.monotonic() > deadline:
                raise LlamaCppError(f"llama.cpp's log has no KV cache line for {self.path}; its end:\n{text[-2000:]}")
            time.sleep(0.05)

    def _complete(self, request: dict) -> dict:
        if self.server is None:
            raise LlamaCppError("use LlamaCpp as a context manager: `with LlamaCpp(path) as run: ...`")
        out = self.server.handle_completions(request)
        if "error" in out or "choices" not in out:
            raise LlamaCppError(f"llama.cpp answered {str(out)[:500]}")
        return out

    def greedy(self, prompt: Sequence[int], new_tokens: int) -> list[int]:
        """The ``new_tokens`` token ids greedy decoding adds to ``prompt`` (ids), end of text ignored."""
        out = self._complete(
            {
                "prompt": [int(t) for t in prompt],
                "n_predict": new_tokens,
                "temperature": 0.0,
                "n_probs": 1,
                "ignore_eos": True,
                "cache_prompt": False,
            }
        )
        return [c["id"] for c in out["choices"][0]["logprobs"]["content"]]

    def token_logprobs(self, ids: Sequence[int]) -> np.ndarray:
        """``[len(ids) - 1]`` log-probabilities (nats) of ``ids[1:]``, each given the ids before it."""
        ids = [int(t) for t in ids]
        out = []
        for t in range(1, len(ids)):
            answer = self._complete(
                {
                    "prompt": ids[:t],
                    "n_predict": 1,
                    "temperature": 0.0,
                    "n_probs": 1,
                    "logit_bias": [[ids[t], _FORCE]],
                    "cache_prompt": True,
                }
            )
            content = answer["choices"][0]["logprobs"]["content"][0]
            if content["id"] != ids[t]:
                raise LlamaCppError(f"forcing token {ids[t]} at position {t} gave {content['id']}")
            out.append(content["logprob"])
        return np.asarray(out, dtype=np.float64)

    def timed(self, prompt: Sequence[int], new_tokens: int) -> dict[str, float]:
        """One uncached run: prompt tokens per second (the prompt's one pass) and generated tokens
        per second (one token a pass), as llama.cpp times them."""
        out = self._complete(
            {
                "prompt": [int(t) for t in prompt],
                "n_predict": new_tokens,
                "temperature": 0.0,
                "ignore_eos": True,
                "cache_prompt": False,
            }
        )
        timings = out["timings"]
        if timings["predicted_n"] != new_tokens:
            raise LlamaCppError(f"llama.cpp generated {timings['predicted_n']} tokens, not {new_tokens}")
        return {
            "prompt tokens per second": timings["prompt_per_second"],
            "generated tokens per second": timings["predicted_per_second"],
        }


def predicted_kv_bytes(
    kv_heads: Sequence[int], head_dim: int, *, cells: int, cache_type: str, flash_attention: bool
) -> tuple[int, int]:
    """``(key bytes, value bytes)`` of llama.cpp's KV cache: every layer's KV heads (``kv_heads``,
    as written to the file), ``head_dim`` numbers each, for ``cells`` positions, in
    ``cache_type`` (``llama_api.CACHE_TYPES``; ``llama_api.predicted_cache_bytes`` does the
    arithmetic). A layer with no KV head caches no key. Without flash attention, layers of
    unequal widths get value caches as wide as the widest (llama.cpp's padding), the layers with
    no head included."""
    from .llama_api import Cache, predicted_cache_bytes

    cache = Cache(cache_type, cache_type)
    keys, values = predicted_cache_bytes(kv_heads, head_dim, cells, cache)
    if not flash_attention and len(set(kv_heads)) > 1:
        values = predicted_cache_bytes([max(kv_heads)] * len(kv_heads), head_dim, cells, cache)[1]
    return keys, values
