"""Zero, mean and resample ablation (heads/removal.py) on a tiny model of every family.

The truths: zero removal is today's gates, bit for bit; the mean over a reference set that is
the input itself, or a donor identical to the input, puts back exactly what the head computed,
so the model is unchanged even with every head removed; another reference changes the output.
"""

import pytest
import torch
from tiny_models import ALL_CASES, bert

import helpers
from helpers.heads.removal import REMOVAL_KINDS, HeadRemoval, reference_outputs
from helpers.sweeps import ablation

CASES = sorted(ALL_CASES)
ATOL = 1e-5  # fairseq leaves its fused kernel once a gate is not one: float rounding only


@pytest.fixture(params=CASES)
def case(request):
    return ALL_CASES[request.param]()


def row(batch: dict, i: int, copies: int = 1) -> dict:
    """Example ``i`` of ``batch`` alone (repeated ``copies`` times along the batch axis)."""
    return {
        k: v[i : i + 1].repeat(copies, *[1] * (v.dim() - 1)) if torch.is_tensor(v) and v.dim() else v
        for k, v in batch.items()
    }


def remove_everything(gates: helpers.HeadGates) -> None:
    with torch.no_grad():
        for kind in gates.kinds:
            gates.tensor(kind).zero_()


def run_removed(case, batch, removal) -> torch.Tensor:
    with helpers.HeadGates(case.model, removal=removal) as gates:
        remove_everything(gates)
        return case.run(case.model, batch)


def test_zero_removal_is_bit_identical_to_the_gates(case):
    spec = {kind: {0: [1], 1: [0, 3]} for kind in case.kinds}
    with helpers.HeadGates(case.model) as gates:
        gates.mask(spec)
        expected = case.run(case.model, case.batch)
    with helpers.HeadGates(case.model, removal=HeadRemoval("zero")) as gates:
        gates.mask(spec)
        got = case.run(case.model, case.batch)
    assert torch.equal(got, expected)
    assert not torch.allclose(got, case.run(case.model, case.batch))  # the mask did something


def test_mean_over_the_input_itself_leaves_the_model_unchanged(case):
    example = row(case.batch, 0)
    unmasked = case.run(case.model, example)
    removal = reference_outputs(case.model, [example], case.run, kind="mean")
    torch.testing.assert_close(run_removed(case, example, removal), unmasked, rtol=0, atol=ATOL)
    other = reference_outputs(case.model, [row(case.batch, 1)], case.run, kind="mean")
    assert (run_removed(case, example, other) - unmasked).abs().max() > 1e-3  # another reference changes it


def test_resample_from_an_identical_example_leaves_the_model_unchanged(case):
    example = row(case.batch, 0)
    twice = row(case.batch, 0, copies=2)
    unmasked = case.run(case.model, twice)
    removal = reference_outputs(case.model, [example], case.run, kind="resample")
    torch.testing.assert_close(run_removed(case, twice, removal), unmasked, rtol=0, atol=ATOL)
    donor = reference_outputs(case.model, [row(case.batch, 1)], case.run, kind="resample")
    assert (run_removed(case, twice, donor) - unmasked).abs().max() > 1e-3


def test_a_gate_between_zero_and_one_mixes_the_head_with_its_replacement():
    case = bert()
    example = row(case.batch, 0)
    removal = reference_outputs(case.model, [row(case.batch, 1)], case.run, kind="mean")
    seen = {}

    def keep(module, args):
        seen.setdefault("inputs", []).append(args[0].detach().clone())

    site = helpers.attention_sites(case.model)[0]
    handle = site.output.register_forward_hook(lambda m, a, o: keep(m, a))
    try:
        with helpers.HeadGates(case.model, removal=removal) as gates:
            with torch.no_grad():
                gates.tensor("self")[0, 2] = 0.25
            case.run(case.model, example)
        case.run(case.model, example)
    finally:
        handle.remove()
    gated, plain = (x.reshape(*x.shape[:-1], 4, 4)[..., 2, :] for x in seen["inputs"])
    mean = removal.means["self", 0][: plain.shape[1], 2]
    torch.testing.assert_close(gated, 0.25 * plain + 0.75 * mean)


def test_resample_donors_follow_the_row_within_each_copy():
    """In a repeated batch (one copy per configuration) row b of every copy takes donor b."""
    case = bert()
    refs = [row(case.batch, i) for i in (2, 3)]
    removal = reference_outputs(case.model, refs, case.run, kind="resample")
    site = helpers.attention_sites(case.model)[0]
    per_head = torch.zeros(4, 7, 4, 4)
    r = removal.replacement(site, per_head, period=2)
    torch.testing.assert_close(r[0], r[2])
    torch.testing.assert_close(r[1], r[3])
    assert not torch.allclose(r[0], r[1])


@pytest.mark.parametrize("kind", ["mean", "resample"])
def test_a_sweep_under_another_removal_equals_one_configuration_at_a_time(kind):
    case = bert()
    removal = reference_outputs(case.model, [row(case.batch, i) for i in (2, 3)], case.run, kind=kind)
    configs = ablation.one_head_configs(case.model)
    base, outs = ablation.single_layer_sweep(
        case.model,
        [case.batch],
        run=case.run,
        configs=configs,
        progress=False,
        configs_per_pass=4,
        processes=1,
        removal=removal,
    )
    for config in configs[:3] + configs[-3:]:
        kind_, layer, masked = config
        with helpers.HeadGates(case.model, removal=removal) as gates:
            gates.mask({kind_: {layer: list(masked)}})
            expected = case.run(case.model, case.batch)
        torch.testing.assert_close(outs[config], expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(base, case.run(case.model, case.batch))


def test_bad_removals_say_what_to_do():
    case = bert()
    with pytest.raises(ValueError, match="choose one of"):
        HeadRemoval("shuffle")
    with pytest.raises(ValueError, match="needs a reference set"):
        HeadRemoval("mean")
    with pytest.raises(ValueError, match="batches of one example"):
        reference_outputs(case.model, [case.batch], case.run)
    with pytest.raises(ValueError, match="empty"):
        reference_outputs(case.model, [], case.run)
    assert set(REMOVAL_KINDS) == {"zero", "mean", "resample"}
