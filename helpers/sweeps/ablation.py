"""Sweeps that mask heads in one layer at a time (paper §3.2 and §3.3), reusing the layers below.

Masking a head of layer l changes nothing below l. So for every batch the sweep runs the model
once, keeps the output of every layer block, and for each configuration in layer l replays the
kept outputs of the blocks below l instead of computing them (the block's ``forward`` is
swapped for a lookup while that configuration runs). With L layers of H heads this costs
H * (L + (L-1) + ... + 1) block evaluations instead of H * L * L: about 0.58 of the naive
loop for 6 layers, less for deeper models. The outputs are the same as the naive loop's, bit
for bit, because each block sees exactly the inputs it would have computed.

Where a site's attention module ends before its output projection (BERT's ``attention.self``,
whose output is exactly the input the gates act on), the masked layer's own queries, keys,
values and attention are replayed too: a mask there changes only what follows them. For
MiniLM-L6 that is a quarter of each masked layer's arithmetic, and nearly all of the last
layer's when it computes its first position only (``zoo.first_token_only``).

The model's forward (``run``) must call every block once per batch, as an encoder, a classifier
or a teacher-forced encoder-decoder does; incremental generation does not (use ``reuse=False``).
For decoder kinds (``enc_dec``, ``dec_self``) the whole encoder is replayed as well.

Every sweep here runs fairseq's attention on its explicit path, the unmasked run included
(``sites.explicit_attention``), so that a configuration's change is the masked heads' alone and
not also the rounding difference between fairseq's fused kernel and its explicit path.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from ..base.devices import device_of
from ..heads.gates import HeadGates, HeadSpec
from ..heads.removal import HeadRemoval
from ..heads.sites import attention_sites, explicit_attention, family_of, sites_by_kind
from .config_batches import (
    UNMASKED,
    Config,
    as_spec,
    config_row_gates,
    fairseq_rows,
    gates_encoder,
    repeat_rows,
)
from .forked import in_order, run_forked, strided_shares, sweep_processes

_DECODER_KINDS = ("enc_dec", "dec_self")


def one_head_configs(model: nn.Module, kinds: Sequence[str] | None = None) -> list[Config]:
    """Mask each head alone (§3.2): one configuration per head."""
    return [(s.kind, s.layer, (h,)) for s in _sites(model, kinds) for h in s.heads]


def all_but_one_configs(model: nn.Module, kinds: Sequence[str] | None = None) -> list[Config]:
    """Keep only head h of its layer (§3.3): one configuration per head."""
    return [(s.kind, s.layer, tuple(g for g in s.heads if g != h)) for s in _sites(model, kinds) for h in s.heads]


def _sites(model: nn.Module, kinds: Sequence[str] | None):
    return [s for s in attention_sites(model) if kinds is None or s.kind in kinds]


def _blocks(model: nn.Module) -> tuple[dict[str, list[nn.Module]], dict[nn.Module, int]]:
    """The layer block (an element of a ModuleList) around each site, by kind, in layer order,
    and each block's batch axis (that of its site's W_o input)."""
    parent_of = {child: parent for parent in model.modules() for child in parent.children()}
    out: dict[str, list[nn.Module]] = {}
    batch_dims: dict[nn.Module, int] = {}
    for kind, sites in sites_by_kind(attention_sites(model)).items():
        blocks = []
        for site in sites:
            m = site.module
            while m in parent_of and not isinstance(parent_of[m], nn.ModuleList):
                m = parent_of[m]
            if m not in parent_of:
                raise ValueError(f"cannot find the layer block around {kind} layer {site.layer}")
            blocks.append(m)
            batch_dims[m] = site.batch_dim
        out[kind] = blocks
    return out, batch_dims


def _cores(model: nn.Module) -> tuple[dict[tuple[str, int], nn.Module], dict[nn.Module, int]]:
    """``{(kind, layer): module}`` for each site whose attention module does not hold its output
    projection: that module's output is the projection's input, which the gates scale, so a mask
    in that layer leaves the module's output unchanged. Also each such module's batch axis."""
    cores, batch_dims = {}, {}
    for site in attention_sites(model):
        if not any(m is site.output for m in site.module.modules()):
            cores[site.kind, site.layer] = site.module
            batch_dims[site.module] = site.batch_dim
    return cores, batch_dims


@contextmanager
def _replaying(outputs: dict[nn.Module, Any]) -> Iterator[None]:
    """Within the block, each module in ``outputs`` returns its given output instead of computing
    it. A ``forward`` already set on the instance (e.g. by ``first_token_only``) is put back after."""
    saved = {m: vars(m).get("forward") for m in outputs}
    for module, output in outputs.items():
        module.forward = _constant(output)
    try:
        yield
    finally:
        for module, forward in saved.items():
            if forward is None:
                del module.forward  # back to the class's forward
            else:
                module.forward = forward


def _replayed(blocks: dict[str, list[nn.Module]], kind: str, layer: int) -> list[nn.Module]:
    """Blocks whose output a mask in (kind, layer) cannot change, in no particular order."""
    stack = blocks[kind][:layer]
    if kind in _DECODER_KINDS and "enc_self" in blocks:
        stack = stack + blocks["enc_self"]
    return list(dict.fromkeys(stack))  # enc_dec and dec_self share blocks


class _Recorder:
    """Forward hooks that keep every block's output of the last forward pass."""

    def __init__(self, blocks: Iterable[nn.Module]):
        self.outputs: dict[nn.Module, Any] = {}
        self.handles = [b.register_forward_hook(self._keep) for b in dict.fromkeys(blocks)]

    def _keep(self, module, args, output):
        self.outputs[module] = output

    def remove(self):
        for h in self.handles:
            h.remove()


@torch.no_grad()
def single_layer_sweep(
    model: nn.Module,
    batches: Iterable,
    *,
    run: Callable[[nn.Module, Any], torch.Tensor],
    configs: Sequence[Config],
    reuse: bool = True,
    progress: bool = True,
    configs_per_pass: int = 1,
    processes: int | None = None,
    removal: HeadRemoval | None = None,
) -> tuple[torch.Tensor, dict[Config, torch.Tensor]]:
    """Run ``run(model, batch)`` (per-example outputs [B, ...]) on every batch unmasked and under
    every configuration of ``configs``, each masking heads of a single layer.

    ``configs_per_pass`` > 1 evaluates up to that many configurations of the same layer in one
    call of ``run`` on the batch repeated once per configuration (config_batches.py); ``run``
    must then accept such a batch (every tensor repeated along axis 0). ``processes`` > 1 splits
    the passes over that many forked processes, each running the unmasked pass too (forked.py;
    None: ``sweep_processes(model)``, 2 on a CPU of 2 or more cores). The results are the same
    either way. ``removal``: how a masked head is removed (removal.py; None: zeroed). Returns the
    unmasked outputs and ``{config: outputs}``, concatenated over batches [N, ...].
    """
    model.eval()
    order = sorted(configs, key=lambda c: (c[0] in _DECODER_KINDS, c[1]))
    passes = _passes(order, configs_per_pass)
    batches = list(batches)
    processes = sweep_processes(model) if processes is None else processes
    if processes > 1 and len(passes) > 1:
        return _forked_sweep(
            model,
            batches,
            run=run,
            passes=passes,
            reuse=reuse,
            progress=progress,
            processes=processes,
            removal=removal,
        )
    with tqdm(total=len(batches) * len(order), desc="ablation sweep", disable=not progress, unit="run") as bar:
        return _sweep_here(model, batches, run=run, passes=passes, reuse=reuse, advance=bar.update, removal=removal)


def _sweep_here(
    model: nn.Module,
    batches: list,
    *,
    run: Callable,
    passes: list[list[Config]],
    reuse: bool,
    advance: Callable[[int], Any],
    removal: HeadRemoval | None = None,
) -> tuple[torch.Tensor, dict[Config, torch.Tensor]]:
    """``single_layer_sweep``'s work in this process, pass by pass (``advance(n)`` after each)."""
    blocks, batch_dims = _blocks(model)
    cores, core_dims = _cores(model)
    batch_dims = {**batch_dims, **core_dims}
    base: list[torch.Tensor] = []
    outs: dict[Config, list[torch.Tensor]] = {c: [] for chunk in passes for c in chunk}
    with explicit_attention(model), HeadGates(model, removal=removal) as gates:
        for batch in batches:
            recorder = _Recorder([b for bs in blocks.values() for b in bs] + list(cores.values())) if reuse else None
            try:
                unmasked = run(model, batch).detach().cpu()
            finally:
                if recorder:
                    recorder.remove()
            base.append(unmasked)
            rows = unmasked.shape[0]
            for chunk in passes:
                kind, layer, _ = chunk[0]
                replay = _replayed(blocks, kind, layer) if reuse else []
                if reuse and (kind, layer) in cores and cores[kind, layer] in recorder.outputs:
                    replay.append(cores[kind, layer])
                kept = {m: repeat_rows(recorder.outputs[m], len(chunk), batch_dims[m]) for m in replay}
                with _replaying(kept), gates.rows(config_row_gates(gates, chunk, rows), period=rows):
                    out = run(model, repeat_rows(batch, len(chunk))).detach().cpu()
                for k, config in enumerate(chunk):
                    outs[config].append(out[k * rows : (k + 1) * rows])
                advance(len(chunk))
    return torch.cat(base), {c: torch.cat(v) for c, v in outs.items()}


def _forked_sweep(
    model: nn.Module,
    batches: list,
    *,
    run: Callable,
    passes: list[list[Config]],
    reuse: bool,
    progress: bool,
    processes: int,
    removal: HeadRemoval | None = None,
) -> tuple[torch.Tensor, dict[Config, torch.Tensor]]:
    """``_sweep_here`` with every ``processes``-th pass in each of ``processes`` forked processes
    (a strided share holds passes of every layer, so the shares cost about the same)."""
    shares = strided_shares(passes, processes)

    def work(share, emit):
        base, outs = _sweep_here(
            model, batches, run=run, passes=share, reuse=reuse, advance=emit.advance, removal=removal
        )
        emit.result(UNMASKED, base)
        for config, out in outs.items():
            emit.result(config, out)

    total = len(batches) * sum(map(len, passes))
    results = dict(run_forked(shares, work, total=total, desc="ablation sweep", progress=progress))
    return results.pop(UNMASKED), results


def _passes(order: Sequence[Config], per_pass: int) -> list[list[Config]]:
    """``order`` cut into runs of at most ``per_pass`` consecutive configurations of one (kind, layer)."""
    if per_pass < 1:
        raise ValueError(f"configs_per_pass must be at least 1, got {per_pass}")
    passes: list[list[Config]] = []
    for config in order:
        if passes and len(passes[-1]) < per_pass and passes[-1][0][:2] == config[:2]:
            passes[-1].append(config)
        else:
            passes.append([config])
    return passes


def _constant(value):
    def forward(*args, **kwargs):
        return value

    return forward


def gated_runs(
    model: nn.Module,
    configs: Sequence[Config],
    *,
    run: Callable[[nn.Module], Any],
    progress: bool = True,
    desc: str = "masked runs",
) -> Iterator[tuple[Config, Any]]:
    """Yield ``(config, run(model))`` for each configuration in turn, with that configuration's
    heads masked (``UNMASKED`` masks none) and the gates reset afterwards.

    For computations that do not call every layer block once, such as beam search, where
    ``single_layer_sweep`` cannot replay the layers below; each configuration costs one full
    ``run``. Consuming the iterator lazily lets a caller store each result as it arrives.
    """
    with explicit_attention(model), HeadGates(model) as gates:
        for config in tqdm(configs, desc=desc, disable=not progress, unit="config"):
            if config != UNMASKED:
                kind, layer, heads = config
                gates.mask({kind: {layer: list(heads)}})
            try:
                result = run(model)
            finally:
                gates.reset()
            yield config, result


def gated_passes(
    model: nn.Module,
    configs: Sequence[Config | HeadSpec],
    *,
    run: Callable[[nn.Module, int, Callable[[int], AbstractContextManager]], Sequence[Any]],
    configs_per_pass: int = 8,
    progress: bool = True,
    desc: str = "masked runs",
    processes: int | None = None,
) -> Iterator[tuple[Config, Any]]:
    """``gated_runs`` with up to ``configs_per_pass`` configurations per call of
    ``run(model, copies, gated)``: ``run`` computes ``copies`` copies of its work in one go,
    entering ``gated(rows)`` around each batch of ``rows`` rows (copy k's rows after copy
    k-1's), and returns one result per copy. Copy k runs under the k-th configuration of the
    pass (config_batches.py); the results equal one configuration at a time.

    For fairseq models the row gates follow ``SequenceGenerator``'s reordering of rows, so
    ``run`` may be a beam search (``translation_model.translate_copies``); for other families it
    must be a plain forward pass. ``configs`` may also be head specs ``{kind: {layer: [heads]}}``
    masking heads of several layers (pruning curves). ``processes`` > 1 splits the passes over
    forked processes (forked.py; None: ``sweep_processes(model)``). Yields ``(config, result)``
    in the order of ``configs``, each as soon as it and those before it are done.

    A pass that runs out of device memory (``torch.cuda.OutOfMemoryError``) is run again in two
    halves, and every later pass is cut to that size, with a warning; the results do not change.
    A single configuration that does not fit raises the error, saying what to lower.
    """
    if configs_per_pass < 1:
        raise ValueError(f"configs_per_pass must be at least 1, got {configs_per_pass}")
    configs = list(configs)
    passes = [
        list(range(s, min(s + configs_per_pass, len(configs)))) for s in range(0, len(configs), configs_per_pass)
    ]
    here = lambda share, advance: _passes_here(model, configs, passes=share, run=run, advance=advance)
    for index, result in _split_passes(
        model, passes, here=here, total=len(configs), desc=desc, progress=progress, processes=processes
    ):
        yield configs[index], result


def _split_passes(
    model: nn.Module,
    passes: list[list[int]],
    *,
    here: Callable,
    total: int,
    desc: str,
    progress: bool,
    processes: int | None,
) -> Iterator[tuple[int, Any]]:
    """``(index, result)`` in index order from ``here(passes, advance)``, run in this process or,
    with ``processes`` > 1 (None: ``sweep_processes(model)``) and more than one pass, over forked
    processes each given every ``processes``-th pass; ``total`` results move the progress bar."""
    processes = sweep_processes(model) if processes is None else processes
    if processes <= 1 or len(passes) <= 1:
        with tqdm(total=total, desc=desc, disable=not progress, unit="config") as bar:
            yield from here(passes, bar.update)
        return

    def work(share, emit):
        for index, result in here(share, emit.advance):
            emit.result(index, result)

    yield from in_order(run_forked(strided_shares(passes, processes), work, total=total, desc=desc, progress=progress))


def _passes_here(
    model: nn.Module, configs: list, *, passes: list[list[int]], run: Callable, advance: Callable[[int], Any]
) -> Iterator[tuple[int, Any]]:
    """``gated_passes``'s work in this process: ``(index in configs, result)`` pass by pass."""
    fairseq = family_of(model) == "fairseq"
    limit: int | None = None  # after an out-of-memory error: the largest pass that fitted
    with explicit_attention(model), HeadGates(model) as gates:

        def gated_for(chunk: list) -> Callable[[int], AbstractContextManager]:
            @contextmanager
            def gated(rows: int):
                if rows % len(chunk):
                    raise ValueError(f"a pass of {len(chunk)} configurations got {rows} rows, not a multiple")
                with gates.rows(config_row_gates(gates, chunk, rows // len(chunk))):
                    if fairseq:
                        with fairseq_rows(model, gates, len(chunk), encoder_shared=not gates_encoder(chunk)):
                            yield
                    else:
                        yield

            return gated

        for indices in passes:
            queue = _cut(indices, limit)
            while queue:
                part = queue.pop(0)
                chunk = [configs[i] for i in part]
                try:
                    results = run(model, len(chunk), gated_for(chunk))
                except torch.cuda.OutOfMemoryError as err:
                    limit = _halved(len(part), model, err)
                    queue[:0] = _cut(part, limit)
                    continue
                advance(len(chunk))
                yield from zip(part, results)


def _cut(indices: list[int], limit: int | None) -> list[list[int]]:
    """``indices`` in consecutive parts of at most ``limit`` (None: one part)."""
    size = limit or len(indices)
    return [indices[s : s + size] for s in range(0, len(indices), size)]


def _halved(configs: int, model: nn.Module, err: BaseException) -> int:
    """The pass size to try after a pass of ``configs`` configurations ran out of device memory:
    half of it, the device's cache emptied first; with one configuration there is nothing to
    halve, and the error says what to lower instead."""
    if configs == 1:
        raise torch.cuda.OutOfMemoryError(
            f"one configuration per pass does not fit in the memory of {device_of(model)}: lower the batch size "
            f"(sentences or examples per batch) or the beam, or free the device ({err})"
        ) from err
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    warnings.warn(
        f"a pass of {configs} configurations ran out of device memory; passes of {configs // 2} from now on "
        "(the results are the same)",
        stacklevel=3,
    )
    return configs // 2


def pruned_sharing_weights(model: nn.Module, spec: Config | HeadSpec) -> nn.Module:
    """A copy of ``model`` with the heads of ``spec`` physically removed (``pruning.prune_heads``)
    that shares every weight and buffer with ``model``: only the module objects are copied, and
    pruning replaces the sliced projections' parameters with new ones (it never writes into a
    tensor), so ``model`` is left as it was. For forward passes: converting the copy in place
    (``.to``, ``.float()``) would write into the shared tensors, so deep-copy it first (or use
    ``kv.budget.pruned_copy``, which copies every weight). ``model`` itself where ``spec`` removes
    nothing."""
    import copy
    from itertools import chain

    from ..heads.pruning import prune_heads

    spec = as_spec(spec)
    if not any(heads for layers in spec.values() for heads in layers.values()):
        return model
    pruned = copy.deepcopy(model, memo={id(t): t for t in chain(model.parameters(), model.buffers())})
    prune_heads(pruned, spec)
    return pruned


def pruned_passes(
    model: nn.Module,
    configs: Sequence[Config | HeadSpec],
    *,
    run: Callable[[nn.Module, int, Callable[[int], AbstractContextManager]], Sequence[Any]],
    progress: bool = True,
    desc: str = "pruned runs",
    processes: int | None = None,
) -> Iterator[tuple[Config | HeadSpec, Any]]:
    """``gated_passes`` with one configuration per pass, run on ``pruned_sharing_weights(model,
    config)`` instead of under gates: a pass costs what the pruned model costs (on MiniLM, about
    0.8 of the gated pass at 30% to 70% of the heads pruned, one thread), for configurations
    spread over many layers, such as pruning curves, where ``single_layer_sweep`` cannot replay
    the layers below. The results equal the gated ones up to float rounding: a zero gate is the
    same as removing the head (tests/test_pruning.py), but the products are summed over fewer
    terms. ``run`` is called as ``run(pruned, 1, gated)`` with a ``gated`` that does nothing; it
    must be a plain forward pass (no beam search: fairseq's row gates are not involved). Yields
    ``(config, result)`` in the order of ``configs``; ``processes`` as in ``gated_passes``."""
    configs = list(configs)

    def here(share: list[list[int]], advance: Callable[[int], Any]) -> Iterator[tuple[int, Any]]:
        for (i,) in share:
            with explicit_attention(model):  # the copy inherits the flags
                result = run(pruned_sharing_weights(model, configs[i]), 1, lambda rows: nullcontext())[0]
            advance(1)
            yield i, result

    for i, result in _split_passes(
        model,
        [[i] for i in range(len(configs))],
        here=here,
        total=len(configs),
        desc=desc,
        progress=progress,
        processes=processes,
    ):
        yield configs[i], result


def masked_passes(
    model: nn.Module,
    specs: Sequence[Config | HeadSpec],
    *,
    run: Callable,
    configs_per_pass: int,
    desc: str,
    progress: bool = False,
) -> Iterator:
    """``(spec, run's result)`` under each head spec: on a CPU with one configuration per pass, on
    a copy of the model with the spec's heads physically removed (``pruned_passes``: the
    arithmetic of the pruned model, the same results up to float rounding); else under gates,
    ``configs_per_pass`` per pass (``gated_passes``), which a GPU runs faster."""
    if configs_per_pass == 1 and device_of(model).type == "cpu":
        return pruned_passes(model, specs, run=run, progress=progress, desc=desc)
    return gated_passes(model, specs, run=run, configs_per_pass=configs_per_pass, progress=progress, desc=desc)
