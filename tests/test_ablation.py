"""The single-layer sweep that replays lower layers gives exactly the naive loop's outputs; every
sweep runs fairseq's attention on its explicit path, the unmasked run too; a pass that runs out of
device memory is halved with the same results."""

import pytest
import torch
from tiny_models import ALL_CASES

import helpers
from helpers.heads.sites import explicit_attention
from helpers.sweeps.ablation import (
    UNMASKED,
    all_but_one_configs,
    gated_passes,
    gated_runs,
    one_head_configs,
    pruned_passes,
    single_layer_sweep,
)


@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_replaying_lower_layers_equals_the_naive_loop(name):
    case = ALL_CASES[name]()
    configs = one_head_configs(case.model) + all_but_one_configs(case.model)[:6]
    batches = [case.batch, case.batch]
    base, fast = single_layer_sweep(case.model, batches, run=case.run, configs=configs, reuse=True, progress=False)
    base_naive, naive = single_layer_sweep(
        case.model, batches, run=case.run, configs=configs, reuse=False, progress=False
    )
    assert torch.equal(base, base_naive)
    for config in configs:
        assert torch.equal(fast[config], naive[config]), config
    # and the naive loop is what masking means: gates applied to a full forward pass (on the
    # explicit attention path, as in every sweep)
    kind, layer, heads = configs[-1]
    with explicit_attention(case.model), helpers.HeadGates(case.model) as gates:
        gates.mask({kind: {layer: list(heads)}})
        expected = case.run(case.model, case.batch)
    assert torch.equal(naive[configs[-1]][: len(expected)], expected)


@pytest.mark.parametrize("reuse", [True, False])
@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_many_configurations_per_pass_equal_one_at_a_time(name, reuse):
    case = ALL_CASES[name]()
    configs = one_head_configs(case.model) + all_but_one_configs(case.model)[:6]
    batches = [case.batch, case.batch]
    base, one = single_layer_sweep(case.model, batches, run=case.run, configs=configs, reuse=reuse, progress=False)
    base_many, many = single_layer_sweep(
        case.model, batches, run=case.run, configs=configs, reuse=reuse, progress=False, configs_per_pass=5
    )
    assert torch.equal(base, base_many)
    # equal up to float32 rounding: a pass over 5 copies of the batch multiplies larger matrices,
    # and some CPUs' kernels (AVX-512 Xeons: up to 2.4e-7 on encoder-only models) round them
    # differently from a pass over one; on others the outputs are bit-identical
    for config in configs:
        torch.testing.assert_close(
            one[config], many[config], rtol=0, atol=1e-5, msg=lambda m, config=config: f"{config}: {m}"
        )
    assert any(not torch.equal(one[c], base) for c in configs)  # the masks did something
    assert all("forward" not in vars(m) for m in case.model.modules())


def test_masks_change_outputs_and_forward_is_restored():
    case = ALL_CASES["bert"]()
    configs = one_head_configs(case.model)
    base, outs = single_layer_sweep(case.model, [case.batch], run=case.run, configs=configs, progress=False)
    assert any(not torch.equal(outs[c], base) for c in configs)
    assert all("forward" not in vars(m) for m in case.model.modules())
    assert torch.equal(case.run(case.model, case.batch), base)


def test_configs_cover_every_head():
    case = ALL_CASES["bert"]()
    sites = helpers.attention_sites(case.model)
    assert len(one_head_configs(case.model)) == sum(s.num_heads for s in sites)
    for _kind, layer, heads in all_but_one_configs(case.model):
        assert len(heads) == sites[layer].num_heads - 1


def test_gated_runs_gate_each_configuration_and_reset_after_it():
    case = ALL_CASES["bert"]()
    configs = [UNMASKED, *one_head_configs(case.model)[:3]]
    got = dict(gated_runs(case.model, configs, run=lambda m: case.run(m, case.batch), progress=False))
    assert list(got) == configs
    assert torch.equal(got[UNMASKED], case.run(case.model, case.batch))
    for kind, layer, heads in configs[1:]:
        with helpers.HeadGates(case.model) as gates:
            gates.mask({kind: {layer: list(heads)}})
            assert torch.equal(got[(kind, layer, heads)], case.run(case.model, case.batch))
    assert not torch.equal(got[configs[1]], got[UNMASKED])
    assert torch.equal(case.run(case.model, case.batch), got[UNMASKED])  # no gate left behind


def test_translation_sweep_masks_one_configuration_at_a_time():
    from helpers.book.experiments.head_effects import translation_sweep
    from helpers.zoo.translation_model import TranslationConfig, model_for, translate
    from helpers.zoo.translation_task import generate

    data = generate({"train": 30}, seed=1)["train"]
    model = model_for(data, TranslationConfig(layers=1, heads=2, embed_dim=8, ffn_dim=16)).eval()
    sources = [p.src for p in data[:5]]
    configs = one_head_configs(model)
    base, outs = translation_sweep(model, sources, configs=configs, beam=2, progress=False)
    with explicit_attention(model):
        assert base == translate(model, sources, beam=2)
    kind, layer, heads = configs[0]
    with explicit_attention(model), helpers.HeadGates(model) as gates:
        gates.mask({kind: {layer: list(heads)}})
        assert outs[configs[0]] == translate(model, sources, beam=2)
    assert translate(model, sources, beam=2) == base  # gates removed afterwards


@pytest.mark.parametrize("beam", [1, 3])
def test_translation_sweep_with_many_configurations_per_search_equals_one_at_a_time(beam):
    """Row gates follow fairseq's reordering of beams and its dropping of finished sentences,
    and decoder-only passes (which share one encoder output) decode what they decode alone."""
    from helpers.book.experiments.head_effects import translation_sweep
    from helpers.zoo.translation_model import TranslationConfig, model_for
    from helpers.zoo.translation_task import generate

    data = generate({"train": 40}, seed=1)["train"]
    torch.manual_seed(0)
    model = model_for(data, TranslationConfig(layers=2, heads=4, embed_dim=16, ffn_dim=32)).eval()
    sources = [p.src for p in data[:9]]
    configs = one_head_configs(model) + all_but_one_configs(model)[:5]
    settings = dict(beam=beam, progress=False, batch_size=4, max_len_b=10)  # 3 batches, the last of 1
    base, one = translation_sweep(model, sources, configs=configs, configs_per_pass=1, **settings)
    base_many, many = translation_sweep(model, sources, configs=configs, configs_per_pass=5, **settings)
    assert base_many == base
    assert {c: many[c] for c in configs} == {c: one[c] for c in configs}
    assert sum(one[c] != base for c in configs) > len(configs) // 2  # most masks change the output
    assert "forward" not in vars(model.encoder) and "reorder_encoder_out" not in vars(model.encoder)


def _calls(modules) -> tuple[dict, list]:
    """Count the calls of each module (forward hooks); returns the counts and the hook handles."""
    counts = {m: 0 for m in modules}

    def count(module, args, output):
        counts[module] += 1

    return counts, [m.register_forward_hook(count) for m in modules]


@pytest.mark.parametrize("first_token", [False, True])
def test_the_masked_layers_own_attention_is_replayed_too(first_token):
    """BERT's attention.self ends before W_o, so a mask in layer l does not change it: the sweep
    computes layer l's keys only in the unmasked pass and in passes masking a layer below l
    (also for the last layer computed at its first token only), with the naive loop's outputs."""
    from transformers import BertConfig, BertForSequenceClassification

    from helpers.zoo.first_token_only import first_token_only

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=4, intermediate_size=32, num_labels=3
    )
    model = BertForSequenceClassification(config).eval()
    ids = torch.randint(5, 50, (5, 8))
    mask = torch.ones_like(ids)
    mask[1, 5:] = mask[3, 2:] = 0
    batches = [{"input_ids": ids, "attention_mask": mask}] * 2
    run = lambda m, b: m(**b).logits
    configs = one_head_configs(model) + all_but_one_configs(model)[:5]
    keys = [layer.attention.self.key for layer in model.bert.encoder.layer]
    with first_token_only(model) if first_token else torch.no_grad():
        counts, handles = _calls(keys)
        try:
            base, fast = single_layer_sweep(model, batches, run=run, configs=configs, progress=False, processes=1)
        finally:
            for h in handles:
                h.remove()
        base_naive, naive = single_layer_sweep(
            model, batches, run=run, configs=configs, reuse=False, progress=False, processes=1
        )
    assert torch.equal(base, base_naive)
    for c in configs:
        assert torch.equal(fast[c], naive[c]), c
    assert any(not torch.equal(fast[c], base) for c in configs)
    for layer, key in enumerate(keys):
        below = sum(c[1] < layer for c in configs)
        assert counts[key] == len(batches) * (1 + below), (layer, counts[key])
    assert all("forward" not in vars(m) for m in model.modules())


def _counting_fused_kernel(monkeypatch) -> list:
    """Count the calls of torch's fused attention kernel (fairseq calls it through ``F``)."""
    import torch.nn.functional as F

    calls, fused = [], F.multi_head_attention_forward

    def counted(*args, **kwargs):
        calls.append(1)
        return fused(*args, **kwargs)

    monkeypatch.setattr(F, "multi_head_attention_forward", counted)
    return calls


def test_every_sweep_runs_fairseqs_explicit_attention_path_the_unmasked_run_too(monkeypatch):
    """An unmasked run on fairseq's fused kernel and masked runs on its explicit path would differ
    by the kernels' rounding as well as by the masked heads: every sweep, its unmasked run
    included, keeps every block on the explicit path, and gives the kernel back afterwards."""
    from tiny_models import fairseq_iwslt

    from helpers.zoo.translation_model import translate_copies

    case = fairseq_iwslt()
    calls = _counting_fused_kernel(monkeypatch)
    case.run(case.model, case.batch)
    assert calls, "outside a sweep fairseq takes its fused kernel (else this test checks nothing)"
    calls.clear()
    configs = one_head_configs(case.model)[:3] + all_but_one_configs(case.model)[-2:]
    single_layer_sweep(case.model, [case.batch], run=case.run, configs=configs, progress=False, processes=1)
    sources = ["w4 w9 w12 w5", "w7 w8"]
    decode = lambda m, copies, gated: translate_copies(m, sources, copies=copies, gated=gated, beam=2, max_len_b=5)
    list(gated_passes(case.model, [UNMASKED, *configs], run=decode, configs_per_pass=3, progress=False, processes=1))
    list(gated_runs(case.model, [UNMASKED, configs[0]], run=lambda m: case.run(m, case.batch), progress=False))
    specs = [{}, {"enc_self": {0: [1, 2]}}]
    list(pruned_passes(case.model, specs, run=lambda m, n, g: [case.run(m, case.batch)], progress=False, processes=1))
    assert not calls
    case.run(case.model, case.batch)
    assert calls  # the kernel is back


def test_the_explicit_path_scores_the_unmasked_model_as_the_fused_kernel_does_up_to_rounding():
    """Explicit and fused attention are equal in exact arithmetic: on the CPU each sentence's
    loss agrees within the rounding bound the significance tests use (``ROUNDING_EPS``)."""
    from tiny_models import fairseq_iwslt, fairseq_wmt

    from helpers.heads.significance import FLOAT32_EPS, ROUNDING_EPS

    for case in (fairseq_iwslt(), fairseq_wmt()):
        with torch.no_grad():
            fused = case.loss(case.model, case.batch)
            with explicit_attention(case.model):
                explicit = case.loss(case.model, case.batch)
        assert ((explicit - fused).abs() / fused.abs()).max().item() < ROUNDING_EPS * FLOAT32_EPS


def test_a_pass_that_runs_out_of_memory_is_halved_with_the_same_results():
    """A simulated out-of-memory error in passes of more than two configurations: the sweep cuts
    that pass and every later one to half, warns, and returns what one pass each would."""
    case = ALL_CASES["bert"]()
    configs = [UNMASKED, *one_head_configs(case.model)[:8]]
    sizes = []

    def run(m, copies, gated, limit=None):
        sizes.append(copies)
        if limit is not None and copies > limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        rows = case.batch["input_ids"].shape[0]
        with gated(copies * rows):
            out = case.run(m, {k: v.repeat(copies, *[1] * (v.dim() - 1)) for k, v in case.batch.items()})
        return list(out.split(rows))

    one = dict(gated_passes(case.model, configs, run=run, configs_per_pass=1, progress=False, processes=1))
    sizes.clear()
    with pytest.warns(UserWarning, match="ran out of device memory; passes of 3"):
        halved = dict(
            gated_passes(
                case.model, configs, run=lambda *a: run(*a, limit=3), configs_per_pass=6, progress=False, processes=1
            )
        )
    assert sizes == [6, 3, 3, 3]  # the failed pass of 6 in halves, then the last 3 at the new size
    for config in configs:
        torch.testing.assert_close(halved[config], one[config], rtol=0, atol=1e-5)
    with pytest.raises(torch.cuda.OutOfMemoryError, match="one configuration per pass does not fit"):
        list(
            gated_passes(
                case.model, configs, run=lambda *a: run(*a, limit=0), configs_per_pass=2, progress=False, processes=1
            )
        )
