"""llama.cpp's C API in this process, through ``ctypes`` on the library the PyPI package
``xllamacpp`` ships (no compiler, no server): every position's logits in one batched pass, the
cache llama.cpp allocates as its log states it, the weights' bytes, prompt and generation speed.

llama.cpp's server returns a prompt's log-probabilities one forced token per pass
(``llama_cpp.LlamaCpp``); here a text of ``n`` tokens is one ``llama_decode`` from an empty cache
with an output at every position, so a setup's perplexity and its KL divergence from another
setup over the whole vocabulary cost one pass a text.

    with LlamaModel("model.gguf") as model:
        model.weight_bytes                              # llama_model_size: every tensor's bytes
        with model.context(cells=512, cache=Cache("q8_0", "q8_0")) as ctx:
            logits = ctx.logits(ids)                    # [len(ids), n_vocab] float32
            ctx.cache_mib, ctx.rotated                  # from llama.cpp's log
            ctx.timed(prompt, new_tokens=32)            # prompt and generated tokens per second

A cache type other than f16 or f32 for the values needs flash attention (llama.cpp refuses it
otherwise), so flash attention is on for every context here: one attention kernel for every
setup, and values that llama.cpp does not pad. llama.cpp rotates queries and keys (and values)
before a quantized cache unless the environment variable ``LLAMA_ATTN_ROT_DISABLE`` is set when
the context is made (``Cache(rotation=False)``); its log says which (``n_rot_k``, ``n_rot_v``).

The structures follow ``include/llama.h`` of the llama.cpp that the pinned xllamacpp wheel was
built from. ``check_layout`` reads llama.cpp's default context parameters through them and
compares each with the header's default, so another wheel fails loudly instead of writing a field
into its neighbour.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CACHE_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8}  # ggml_type
_BLOCKS = {"f32": (1, 4), "f16": (1, 2), "q8_0": (32, 34), "q4_0": (32, 18)}  # (numbers, bytes) a block
FLASH_ON = 1  # llama_flash_attn_type: -1 auto, 0 off, 1 on
ROTATION_SWITCH = "LLAMA_ATTN_ROT_DISABLE"
LOG_DEBUG, LOG_CONT = 1, 5  # ggml_log_level: debug lines are dropped, a CONT line continues the last
MIB = 1024 * 1024
KV_LINE = re.compile(
    r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,.*"
    r"K \((\w+)\):\s*([\d.]+) MiB, V \((\w+)\):\s*([\d.]+) MiB"
)
_ROT_LINE = re.compile(r"llama_kv_cache: n_rot_([kv]) = (\d+)")


class LlamaApiError(RuntimeError):
    """llama.cpp refused a file or a setting, or its log did not say what was asked of it."""


@dataclass(frozen=True)
class Cache:
    """A KV cache setting: the keys' and the values' types (``CACHE_TYPES``) and whether
    llama.cpp may rotate before quantizing (its default; ``False`` sets ``LLAMA_ATTN_ROT_DISABLE``)."""

    key: str = "f16"
    value: str = "f16"
    rotation: bool = True

    def __post_init__(self):
        for kind in (self.key, self.value):
            if kind not in CACHE_TYPES:
                raise ValueError(f"unknown cache type {kind!r}: use one of {', '.join(CACHE_TYPES)}")

    @property
    def label(self) -> str:
        kinds = self.key if self.key == self.value else f"K {self.key}, V {self.value}"
        return kinds + ("" if self.rotation else ", no rotation")


def predicted_cache_bytes(kv_heads: Sequence[int], head_dim: int, cells: int, cache: Cache) -> tuple[int, int]:
    """``(key bytes, value bytes)`` llama.cpp allocates with flash attention: every layer's KV heads
    (``kv_heads``, as written to the file), ``head_dim`` numbers each, for ``cells`` positions, in
    the cache's types (a block of 32 numbers is 34 bytes in q8_0 and 18 in q4_0)."""

    def size(kind: str) -> int:
        numbers, nbytes = _BLOCKS[kind]
        return sum(kv_heads) * head_dim * cells // numbers * nbytes

    return size(cache.key), size(cache.value)


# ---- the structures and the library ------------------------------------------------------------
class _ContextParams(ctypes.Structure):
    _fields_ = [
        ("n_ctx", ctypes.c_uint32),
        ("n_batch", ctypes.c_uint32),
        ("n_ubatch", ctypes.c_uint32),
        ("n_seq_max", ctypes.c_uint32),
        ("n_rs_seq", ctypes.c_uint32),
        ("n_outputs_max", ctypes.c_uint32),
        ("n_outputs_max_per_seq", ctypes.c_uint32),
        ("n_threads", ctypes.c_int32),
        ("n_threads_batch", ctypes.c_int32),
        ("ctx_type", ctypes.c_int),
        ("rope_scaling_type", ctypes.c_int),
        ("pooling_type", ctypes.c_int),
        ("attention_type", ctypes.c_int),
        ("flash_attn_type", ctypes.c_int),
        ("rope_freq_base", ctypes.c_float),
        ("rope_freq_scale", ctypes.c_float),
        ("yarn_ext_factor", ctypes.c_float),
        ("yarn_attn_factor", ctypes.c_float),
        ("yarn_beta_fast", ctypes.c_float),
        ("yarn_beta_slow", ctypes.c_float),
        ("yarn_orig_ctx", ctypes.c_uint32),
        ("defrag_thold", ctypes.c_float),
        ("cb_eval", ctypes.c_void_p),
        ("cb_eval_user_data", ctypes.c_void_p),
        ("type_k", ctypes.c_int),
        ("type_v", ctypes.c_int),
        ("abort_callback", ctypes.c_void_p),
        ("abort_callback_data", ctypes.c_void_p),
        ("abort_callback_extra", ctypes.c_void_p),  # the pinned build has one more pointer here (NULL)
        ("embeddings", ctypes.c_bool),
        ("offload_kqv", ctypes.c_bool),
        ("no_perf", ctypes.c_bool),
        ("op_offload", ctypes.c_bool),
        ("swa_full", ctypes.c_bool),
        ("kv_unified", ctypes.c_bool),
        ("samplers", ctypes.c_void_p),
        ("n_samplers", ctypes.c_size_t),
        # room to spare: a struct this size is returned and passed through memory, so a larger
        # buffer than llama.cpp's is safe and a smaller one would not be
        ("_spare", ctypes.c_uint8 * 64),
    ]


class _ModelParams(ctypes.Structure):
    """Passed through as llama.cpp returns it (its defaults: every weight in this process's memory)."""

    _fields_ = [("_bytes", ctypes.c_uint8 * 256)]


class _Batch(ctypes.Structure):
    _fields_ = [
        ("n_tokens", ctypes.c_int32),
        ("token", ctypes.POINTER(ctypes.c_int32)),
        ("embd", ctypes.POINTER(ctypes.c_float)),
        ("pos", ctypes.POINTER(ctypes.c_int32)),
        ("n_seq_id", ctypes.POINTER(ctypes.c_int32)),
        ("seq_id", ctypes.POINTER(ctypes.POINTER(ctypes.c_int32))),
        ("logits", ctypes.POINTER(ctypes.c_int8)),
    ]


_LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_HEADER_DEFAULTS = {
    "n_ctx": 512,
    "n_batch": 2048,
    "n_ubatch": 512,
    "n_seq_max": 1,
    "n_threads": 4,  # GGML_DEFAULT_N_THREADS
    "n_threads_batch": 4,
    "flash_attn_type": -1,
    "yarn_ext_factor": -1.0,
    "defrag_thold": -1.0,
    "type_k": CACHE_TYPES["f16"],
    "type_v": CACHE_TYPES["f16"],
    "embeddings": False,
    "offload_kqv": True,
    "no_perf": True,
    "op_offload": True,
    "swa_full": True,
    "kv_unified": False,
    "n_samplers": 0,
}
_SIGNATURES = {
    "llama_backend_init": ([], None),
    "llama_log_set": ([_LOG_CALLBACK, ctypes.c_void_p], None),
    "llama_log_get": ([ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)], None),
    "llama_model_default_params": ([], _ModelParams),
    "llama_context_default_params": ([], _ContextParams),
    "llama_model_load_from_file": ([ctypes.c_char_p, _ModelParams], ctypes.c_void_p),
    "llama_model_free": ([ctypes.c_void_p], None),
    "llama_model_size": ([ctypes.c_void_p], ctypes.c_uint64),
    "llama_model_get_vocab": ([ctypes.c_void_p], ctypes.c_void_p),
    "llama_vocab_n_tokens": ([ctypes.c_void_p], ctypes.c_int32),
    "llama_init_from_model": ([ctypes.c_void_p, _ContextParams], ctypes.c_void_p),
    "llama_free": ([ctypes.c_void_p], None),
    "llama_set_n_threads": ([ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32], None),
    "llama_get_memory": ([ctypes.c_void_p], ctypes.c_void_p),
    "llama_memory_clear": ([ctypes.c_void_p, ctypes.c_bool], None),
    "llama_batch_init": ([ctypes.c_int32, ctypes.c_int32, ctypes.c_int32], _Batch),
    "llama_batch_free": ([_Batch], None),
    "llama_decode": ([ctypes.c_void_p, _Batch], ctypes.c_int32),
    "llama_get_logits": ([ctypes.c_void_p], ctypes.POINTER(ctypes.c_float)),
    "llama_get_logits_ith": ([ctypes.c_void_p, ctypes.c_int32], ctypes.POINTER(ctypes.c_float)),
}


def _library_path() -> Path:
    spec = importlib.util.find_spec("xllamacpp")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "llama.cpp's library comes with the PyPI package xllamacpp (pinned in pyproject.toml): run `make setup`"
        )
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("xllamacpp*.so"))
    if not found:
        raise ImportError(f"no llama.cpp library (xllamacpp*.so) in {spec.submodule_search_locations}")
    return found[0]


@functools.cache
def library() -> ctypes.CDLL:
    """llama.cpp's library, its functions typed, its structures checked (``check_layout``), its
    backend started: once a process."""
    lib = ctypes.CDLL(str(_library_path()))
    for name, (args, result) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, result
    check_layout(lib)
    with _captured_log(lib):
        lib.llama_backend_init()
    return lib


def check_layout(lib: ctypes.CDLL) -> None:
    """Raise ``LlamaApiError`` unless llama.cpp's default context parameters, read through
    ``_ContextParams``, are the header's defaults (``_HEADER_DEFAULTS``): a field out of place
    reads another field's value."""
    params = lib.llama_context_default_params()
    wrong = {name: getattr(params, name) for name, value in _HEADER_DEFAULTS.items() if getattr(params, name) != value}
    if wrong:
        raise LlamaApiError(
            f"llama.cpp's context parameters are not laid out as helpers/serving/llama_api.py expects (read {wrong}, "
            f"expected { ({k: _HEADER_DEFAULTS[k] for k in wrong}) }): the xllamacpp wheel is not the pinned one"
        )


class _Log:
    def __init__(self):
        self.lines: list[str] = []

    def __call__(self, level: int, text: bytes, _user) -> None:
        line = (text or b"").decode(errors="replace")
        if level == LOG_CONT and self.lines:
            self.lines[-1] += line
        elif level != LOG_DEBUG:
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.lines)


@contextmanager
def _captured_log(lib: ctypes.CDLL) -> Iterator[_Log]:
    """llama.cpp's log lines (debug dropped) while the block runs; the logger before it is
    restored after (llama.cpp has one logger a process)."""
    previous, user = ctypes.c_void_p(), ctypes.c_void_p()
    lib.llama_log_get(ctypes.byref(previous), ctypes.byref(user))
    log = _Log()
    callback = _LOG_CALLBACK(log)
    lib.llama_log_set(callback, None)
    try:
        yield log
    finally:
        lib.llama_log_set(ctypes.cast(previous, _LOG_CALLBACK) if previous.value else _LOG_CALLBACK(), user)


@contextmanager
def _rotation(allowed: bool) -> Iterator[None]:
    saved = os.environ.get(ROTATION_SWITCH)
    if allowed:
        os.environ.pop(ROTATION_SWITCH, None)
    else:
        os.environ[ROTATION_SWITCH] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(ROTATION_SWITCH, None)
        else:
            os.environ[ROTATION_SWITCH] = saved


def _free_quietly(function: str, handle: int) -> None:
    """Call llama.cpp's ``function`` on ``handle`` with its log captured (it logs what it frees)."""
    lib = library()
    with _captured_log(lib):
        getattr(lib, function)(handle)


# ---- a model and its contexts ---------------------------------------------------------------------
class LlamaModel:
    """A GGUF file loaded by llama.cpp; a context manager. ``weight_bytes``: every tensor's bytes
    as llama.cpp counts them; ``n_vocab``; ``log``: what llama.cpp logged while loading."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(
                f"{self.path} does not exist: write it with helpers.serving.gguf_export.export_gguf"
            )
        self._model = None

    def __enter__(self) -> LlamaModel:
        lib = library()
        with _captured_log(lib) as log:
            self._model = lib.llama_model_load_from_file(str(self.path).encode(), lib.llama_model_default_params())
        self.log = log.text
        if not self._model:
            errors = [line for line in log.lines if "error" in line.lower() or "failed" in line.lower()]
            raise LlamaApiError(f"llama.cpp could not load {self.path}:\n" + "".join(errors[-10:]))
        self.weight_bytes = int(lib.llama_model_size(self._model))
        self.n_vocab = int(lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(self._model)))
        return self

    def __exit__(self, *exc) -> None:
        if self._model:
            _free_quietly("llama_model_free", self._model)
            self._model = None

    def context(self, cells: int, cache: Cache = Cache(), threads: int = 1, batch: int | None = None) -> LlamaContext:
        """A context of ``cells`` KV cells in ``cache``'s types, run on ``threads`` threads, that
        takes up to ``batch`` tokens a pass (default: ``cells``)."""
        if self._model is None:
            raise LlamaApiError("use LlamaModel as a context manager: `with LlamaModel(path) as model: ...`")
        return LlamaContext(self, cells, cache=cache, threads=threads, batch=batch or cells)


class LlamaContext:
    """One llama.cpp context (a KV cache and its compute buffers); a context manager. After
    ``__enter__``: ``cache_mib``, ``k_mib``, ``v_mib`` (as logged, to 0.01 MiB), ``cells``,
    ``k_type``, ``v_type``, ``rotated`` (``{"k": bool, "v": bool}``) and ``log``."""

    def __init__(self, model: LlamaModel, cells: int, *, cache: Cache, threads: int, batch: int):
        self.model, self.cache, self.threads, self.batch = model, cache, threads, batch
        self._requested_cells = cells
        self._ctx = None

    def __enter__(self) -> LlamaContext:
        lib = library()
        params = lib.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = self._requested_cells, self.batch, min(self.batch, 512)
        params.n_threads = params.n_threads_batch = self.threads
        params.flash_attn_type = FLASH_ON
        params.type_k, params.type_v = CACHE_TYPES[self.cache.key], CACHE_TYPES[self.cache.value]
        with _rotation(self.cache.rotation), _captured_log(lib) as log:
            self._ctx = lib.llama_init_from_model(self.model._model, params)
        self.log = log.text
        if not self._ctx:
            refused = [line for line in log.lines if "requires" in line or "error" in line.lower()]
            raise LlamaApiError(
                f"llama.cpp refused a context with a {self.cache.label} cache: {''.join(refused).strip()}"
            )
        self._read_log()
        return self

    def __exit__(self, *exc) -> None:
        if self._ctx:
            _free_quietly("llama_free", self._ctx)
            self._ctx = None

    def _read_log(self) -> None:
        found = KV_LINE.search(self.log)
        if not found:
            raise LlamaApiError(f"llama.cpp's log has no KV cache line; its end:\n{self.log[-2000:]}")
        total, cells, k_type, k, v_type, v = found.groups()
        self.cache_mib, self.k_mib, self.v_mib = float(total), float(k), float(v)
        self.cells, self.k_type, self.v_type = int(cells), k_type, v_type
        rot = {kind: int(n) for kind, n in _ROT_LINE.findall(self.log)}
        if set(rot) != {"k", "v"}:
            raise LlamaApiError(
                f"llama.cpp's log does not say whether it rotates keys and values:\n{self.log[-2000:]}"
            )
        self.rotated = {kind: n > 0 for kind, n in rot.items()}

    def _decode(self, ids: Sequence[int], start: int, first_output: int) -> None:
        """One pass over ``ids`` at positions ``start ..``, with logits from ``ids[first_output]`` on."""
        lib = library()
        n = len(ids)
        batch = lib.llama_batch_init(n, 0, 1)
        try:
            for i, token in enumerate(ids):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = int(token), start + i, 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1 if i >= first_output else 0
            batch.n_tokens = n
            with _captured_log(lib) as log:
                status = lib.llama_decode(self._ctx, batch)
        finally:
            lib.llama_batch_free(batch)
        if status != 0:
            raise LlamaApiError(
                f"llama_decode returned {status} for {n} tokens at position {start}: {log.text[-500:]}"
            )

    def _clear(self) -> None:
        lib = library()
        lib.llama_memory_clear(lib.llama_get_memory(self._ctx), True)

    def logits(self, ids: Sequence[int], first_output: int = 0) -> np.ndarray:
        """``[len(ids) - first_output, n_vocab]`` float32: the logits after each prefix
        ``ids[: i + 1]`` for ``i >= first_output``, from one pass over ``ids`` in an empty cache
        (at most ``batch`` tokens and ``cells`` cells). Positions before ``first_output`` are read
        but give no logits, which saves the output layer's work there."""
        if not 0 < len(ids) <= min(self.batch, self.cells):
            raise ValueError(f"{len(ids)} tokens: a pass takes 1 to {min(self.batch, self.cells)} here")
        if not 0 <= first_output < len(ids):
            raise ValueError(f"first_output={first_output}: it must be a position of the {len(ids)} tokens")
        self._clear()
        self._decode(ids, 0, first_output)
        out = library().llama_get_logits(self._ctx)
        return np.ctypeslib.as_array(out, shape=(len(ids) - first_output, self.model.n_vocab)).copy()

    def timed(self, prompt: Sequence[int], new_tokens: int, threads: int | None = None) -> dict[str, float]:
        """One uncached run on ``threads`` (default: the context's): the prompt in one pass, then
        ``new_tokens`` greedy tokens one pass each. Returns prompt and generated tokens per second
        (wall time around llama.cpp's calls, the argmax included)."""
        lib = library()
        n = threads or self.threads
        with _captured_log(lib):
            lib.llama_set_n_threads(self._ctx, n, n)
        self._clear()
        start = time.perf_counter()
        self._decode(prompt, 0, first_output=len(prompt) - 1)
        prompt_seconds = time.perf_counter() - start
        start = time.perf_counter()
        for i in range(new_tokens):
            last = np.ctypeslib.as_array(lib.llama_get_logits_ith(self._ctx, -1), shape=(self.model.n_vocab,))
            self._decode([int(last.argmax())], len(prompt) + i, first_output=0)
        generated_seconds = time.perf_counter() - start
        with _captured_log(lib):
            lib.llama_set_n_threads(self._ctx, self.threads, self.threads)
        return {
            "prompt tokens per second": len(prompt) / prompt_seconds,
            "generated tokens per second": new_tokens / generated_seconds,
        }
