"""Sweeps split over forked processes give what one process gives, in the same order, and a
process that fails or dies is reported instead of waited for."""

import os

import pytest
import torch
from tiny_models import ALL_CASES

from helpers.sweeps import forked
from helpers.sweeps.ablation import all_but_one_configs, gated_passes, one_head_configs, single_layer_sweep


@pytest.mark.parametrize("name", sorted(ALL_CASES))
def test_a_sweep_over_two_processes_equals_one_process(name):
    case = ALL_CASES[name]()
    configs = one_head_configs(case.model) + all_but_one_configs(case.model)[:6]
    batches = [case.batch, case.batch]
    base, here = single_layer_sweep(case.model, batches, run=case.run, configs=configs, progress=False, processes=1)
    base_split, split = single_layer_sweep(
        case.model, batches, run=case.run, configs=configs, progress=False, configs_per_pass=2, processes=2
    )
    assert torch.equal(base_split, base)
    assert set(split) == set(configs)
    for config in configs:
        assert torch.equal(split[config], here[config]), config
    assert any(not torch.equal(here[c], base) for c in configs)  # the masks did something
    assert all("forward" not in vars(m) for m in case.model.modules())  # the parent's model untouched


def test_beam_searches_over_three_processes_come_back_in_order(monkeypatch):
    from helpers.zoo.scorers import masked_translations
    from helpers.zoo.translation_model import TranslationConfig, model_for
    from helpers.zoo.translation_task import generate

    data = generate({"train": 40}, seed=1)["train"]
    torch.manual_seed(0)
    model = model_for(data, TranslationConfig(layers=2, heads=4, embed_dim=16, ffn_dim=32)).eval()
    sources = [p.src for p in data[:7]]
    configs = one_head_configs(model)[:11] + [{"enc_self": {0: [0, 1]}, "dec_self": {1: [3]}}]
    settings = dict(beam=2, batch_size=4, max_len_b=10)
    monkeypatch.setenv(forked.ENV, "1")
    here = list(masked_translations(model, sources, configs=configs, configs_per_pass=2, progress=False, **settings))
    monkeypatch.setenv(forked.ENV, "3")
    split = list(masked_translations(model, sources, configs=configs, configs_per_pass=2, progress=False, **settings))
    assert [c for c, _ in split] == configs
    assert split == here
    assert len({tuple(h) for _, h in here}) > 1


def _failing_run(model, copies, gated):
    raise ValueError("a deliberate failure in the worker")


def test_a_failing_process_raises_its_error_in_the_caller():
    case = ALL_CASES["bert"]()
    configs = one_head_configs(case.model)
    with pytest.raises(forked.SweepProcessError, match="a deliberate failure in the worker"):
        list(gated_passes(case.model, configs, run=_failing_run, configs_per_pass=2, progress=False, processes=2))


def test_a_process_that_dies_is_reported_with_its_exit_code():
    def work(share, emit):
        emit.result(share[0], "first")
        os._exit(3)

    with pytest.raises(forked.SweepProcessError, match="exit code 3"):
        list(forked.run_forked([[0], [1]], work, total=2, progress=False))


def test_results_are_released_in_order():
    arrived = [(2, "c"), (0, "a"), (3, "d"), (1, "b")]
    assert list(forked.in_order(iter(arrived))) == [(0, "a"), (1, "b"), (2, "c"), (3, "d")]


def test_the_process_count_follows_the_environment(monkeypatch):
    case = ALL_CASES["bert"]()
    monkeypatch.setenv(forked.ENV, "3")
    assert forked.sweep_processes(case.model) == 3
    monkeypatch.setenv(forked.ENV, "zero")
    with pytest.raises(ValueError, match="whole number"):
        forked.sweep_processes(case.model)
    monkeypatch.delenv(forked.ENV)
    monkeypatch.setenv("WORLD_SIZE", "4")  # torchrun already splits the sweep
    assert forked.sweep_processes(case.model) == 1
