"""The sweep decoder's greedy search equals fairseq's SequenceGenerator with one beam, token for
token: unmasked, under one head masked of every attention kind, under a mask over several
layers, several configurations per search (with and without the shared encoder), and split
over processes."""

import pytest
import torch

from helpers.sweeps.ablation import gated_passes, one_head_configs
from helpers.zoo.sweep_decoder import decode_copies, greedy_copies
from helpers.zoo.translation_model import TranslationConfig, model_for, train, translate, translate_copies
from helpers.zoo.translation_task import generate


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A small model trained for a few epochs, so that its sentences end at different steps."""
    data = generate({"train": 600, "test13": 40}, seed=3)
    torch.manual_seed(0)
    config = TranslationConfig(
        layers=2,
        heads=4,
        embed_dim=32,
        ffn_dim=64,
        epochs=8,
        max_tokens=500,
        lr=5e-3,
        warmup_updates=30,
        dropout=0.0,
        seed=1,
    )
    model = model_for(data["train"], config)
    train(
        model,
        data["train"],
        valid_pairs=data["test13"][:8],
        config=config,
        directory=tmp_path_factory.mktemp("ckpt"),
        progress=False,
    )
    return model.eval(), [p.src for p in data["test13"]]


def _searches(model, sources, configs, decode, per_pass, processes=1):
    def run(m, copies, gated):
        return decode(m, sources, copies=copies, gated=gated, batch_size=16, max_len_b=12)

    return [
        result
        for _, result in gated_passes(
            model, configs, run=run, configs_per_pass=per_pass, progress=False, processes=processes
        )
    ]


def _fairseq(m, sources, *, copies, gated, **kw):
    return translate_copies(m, sources, copies=copies, gated=gated, beam=1, **kw)


def test_greedy_equals_the_generator_unmasked(trained):
    model, sources = trained
    fairseq = translate(model, sources, beam=1, batch_size=16, max_len_b=12)
    (greedy,) = greedy_copies(model, sources, copies=1, batch_size=16, max_len_b=12)
    assert greedy == fairseq
    lengths = {len(h.split()) for h in greedy}
    assert len(lengths) > 3  # sentences end at many different steps
    assert decode_copies(model, sources, copies=1, beam=1, batch_size=16, max_len_b=12) == [fairseq]


def test_both_searches_stop_where_fairseqs_length_rule_says(trained):
    """At most ``max_len_a`` x the batch's source width + ``max_len_b`` tokens: a flat limit with
    ``max_len_a`` 0 (fairseq's default, as the authors ran it), one that grows with the source
    with ``max_len_a`` 1; the greedy search and fairseq's agree under both."""
    model, sources = trained
    longest = {}
    for max_len_a in (0.0, 1.0):
        limit = dict(batch_size=16, max_len_a=max_len_a, max_len_b=2)
        fairseq = translate(model, sources, beam=1, **limit)
        (greedy,) = greedy_copies(model, sources, copies=1, **limit)
        assert greedy == fairseq
        longest[max_len_a] = max(len(h.split()) for h in greedy)
    assert longest[0.0] <= 2 < longest[1.0]


@pytest.mark.parametrize("per_pass", [1, 5])
def test_greedy_equals_the_generator_under_every_kind_of_mask(trained, per_pass):
    model, sources = trained
    configs = one_head_configs(model) + [
        {"enc_self": {0: [0, 1]}, "enc_dec": {1: [2]}, "dec_self": {0: [3]}},
        {"dec_self": {0: [0, 1, 2], 1: [1]}},
        {"enc_dec": {0: [0, 1, 2, 3]}},
    ]
    fairseq = _searches(model, sources, configs, _fairseq, per_pass)
    greedy = _searches(model, sources, configs, greedy_copies, per_pass)
    kinds = {c[0] for c in configs if isinstance(c, tuple)}
    assert kinds == {"enc_self", "enc_dec", "dec_self"}
    for config, g, f in zip(configs, greedy, fairseq):
        assert g == f, config
    assert len(greedy) == len(configs)
    assert len({tuple(h) for h in greedy}) > len(configs) // 2  # the masks change the translations


def test_greedy_over_two_processes_equals_one(trained, monkeypatch):
    model, sources = trained
    configs = one_head_configs(model)[::3]
    here = _searches(model, sources, configs, greedy_copies, 3, processes=1)
    split = _searches(model, sources, configs, greedy_copies, 3, processes=2)
    assert split == here


def test_beam_above_one_goes_to_fairseq(trained):
    model, sources = trained
    assert decode_copies(model, sources[:10], copies=2, beam=3, batch_size=4, max_len_b=8) == translate_copies(
        model, sources[:10], copies=2, beam=3, batch_size=4, max_len_b=8
    )


def test_the_generator_switch_and_private_sweeps_turn_the_levers_off(monkeypatch, tmp_path):
    """The two switches a build uses to show that the sweep decoder and shared sweeps change no
    result: one sends greedy decoding back to fairseq, the other gives each chapter its own sweeps."""
    import helpers.zoo.sweep_decoder as sd
    import helpers.zoo.translation_model as tm
    from helpers.zoo.locations import sweeps_scope

    calls = []
    monkeypatch.setattr(tm, "translate_copies", lambda *a, **k: calls.append(k["beam"]) or [["x"]])
    monkeypatch.setattr(sd, "greedy_copies", lambda *a, **k: calls.append("greedy") or [["y"]])
    assert sd.decode_copies(None, ["a"], copies=1, beam=1) == [["y"]]
    monkeypatch.setenv(sd.DECODER_ENV, "generator")
    assert sd.decode_copies(None, ["a"], copies=1, beam=1) == [["x"]]
    assert calls == ["greedy", 1]
    assert sweeps_scope(tmp_path) == tmp_path
    monkeypatch.setenv("SIXTEEN_HEADS_PRIVATE_SWEEPS", "1")
    monkeypatch.setenv("SIXTEEN_HEADS_CHAPTER", "12_unimportant_or_unmeasured")
    assert sweeps_scope(tmp_path) == tmp_path / "12_unimportant_or_unmeasured"


def test_a_gpu_decodes_as_many_configurations_per_pass_as_half_its_free_memory_holds(trained, monkeypatch):
    """On a CPU 12 per search; on a GPU the number that ``MEMORY_SHARE`` of the free memory holds
    by ``search_bytes``, written out here for the trained model, within 1 and the maximum."""
    from helpers.zoo import sweep_decoder

    model, sources = trained
    assert sweep_decoder.configs_per_pass_for(model, sources) == sweep_decoder.CPU_CONFIGS_PER_PASS == 12
    longest = max(len(s.split()) for s in sources) + 1
    layers, dim, vocab = (
        len(model.decoder.layers),
        model.decoder.embed_tokens.embedding_dim,
        len(model.decoder.dictionary),
    )
    rows, out_len = min(64, len(sources)) * 5, 200
    one = 4 * (2 * layers * 2 * rows * dim * (out_len + longest) + rows * longest * dim + 3 * rows * vocab)
    assert (
        sweep_decoder.search_bytes(
            model, longest, batch_size=min(64, len(sources)), beam=5, max_len_a=0.0, max_len_b=200
        )
        == one
    )
    monkeypatch.setattr(sweep_decoder, "device_of", lambda m: torch.device("cuda", 0))
    for free, expected in ((10 * one, 5), (one, 1), (10**6 * one, sweep_decoder.MAX_CONFIGS_PER_PASS)):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device, free=free: (free, 2 * free))
        assert sweep_decoder.configs_per_pass_for(model, sources, beam=5) == expected
