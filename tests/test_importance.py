"""head_importance against brute-force finite differences, on tiny float64 models.

The finite differences do not use helpers' gates: for abs_per="example" a head's gate is
emulated by scaling that head's value projection (the context vector is linear in it); for
abs_per="token" by a hook written here that scales one head at one query position.
"""

import pytest
import torch
from tiny_models import bert, fairseq_wmt, llama, marian

import helpers

EPS = 1e-5


def _double(case):
    case.model.double()
    return case


def _value_scaled_losses(case, site, head, scale):
    rows = slice(head * site.head_dim, (head + 1) * site.head_dim)
    w, b = site.value.weight, site.value.bias
    saved = (w.data[rows].clone(), None if b is None else b.data[rows].clone())
    with torch.no_grad():
        w.data[rows] *= scale
        if b is not None:
            b.data[rows] *= scale
        losses = case.loss(case.model, case.batch)
        w.data[rows] = saved[0]
        if b is not None:
            b.data[rows] = saved[1]
    return losses


def fd_example(case):
    """E_x |dL(x)/dxi_h| by central differences on V scaling. {kind: [layers, heads]}"""
    out = {}
    for site in helpers.attention_sites(case.model):
        row = out.setdefault(site.kind, torch.zeros(2, 4, dtype=torch.float64))
        for h in range(site.num_heads):
            d = (_value_scaled_losses(case, site, h, 1 + EPS) - _value_scaled_losses(case, site, h, 1 - EPS)) / (
                2 * EPS
            )
            row[site.layer, h] = d.abs().mean()
    return out


def scaled_losses(case, site, head, scale, position=None, call=None):
    """Per-example losses with head ``head``'s context vector scaled at one query position (every
    position when None), by a W_o pre-hook written here (not helpers' gates); with ``call``, only
    in that call of the site (0-based) where the loss runs the model more than once."""
    d = site.head_dim
    seen = [0]

    def hook(module, args):
        (x,) = args
        seen[0] += 1
        if call is not None and seen[0] - 1 != call:
            return None
        x = x.clone()
        index = [slice(None)] * x.dim()
        if position is not None:
            index[1 - site.batch_dim] = position  # the time axis
        index[-1] = slice(head * d, (head + 1) * d)
        x[tuple(index)] *= scale
        return (x,)

    handle = site.output.register_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            return case.loss(case.model, case.batch)
    finally:
        handle.remove()


def fd_token(case, calls=1):
    """E_x sum_t |dL(x)/dxi_{h,t}| by central differences, one query position at a time (of each
    of the ``calls`` the loss makes to the model)."""
    for s in helpers.attention_sites(case.model):  # fairseq: use the path that calls W_o
        if s.family == "fairseq":
            s.module.skip_embed_dim_check = True
    out = {}
    for site in helpers.attention_sites(case.model):
        row = out.setdefault(site.kind, torch.zeros(2, 4, dtype=torch.float64))
        length = _query_length(case, site)
        for h in range(site.num_heads):
            total = 0
            for t in range(length):
                for call in range(calls) if calls > 1 else [None]:
                    plus = scaled_losses(case, site, h, 1 + EPS, position=t, call=call)
                    minus = scaled_losses(case, site, h, 1 - EPS, position=t, call=call)
                    total = total + ((plus - minus) / (2 * EPS)).abs()
            row[site.layer, h] = total.mean()
    for s in helpers.attention_sites(case.model):
        if s.family == "fairseq":
            s.module.skip_embed_dim_check = False
    return out


def _query_length(case, site):
    b = case.batch
    if site.family == "fairseq":
        return (b["src_tokens"] if site.kind == "enc_self" else b["prev_output_tokens"]).shape[1]
    if site.kind in ("self", "enc_self"):
        return b["input_ids"].shape[1]
    return b["decoder_input_ids"].shape[1]


CASES = {"bert": bert, "marian": marian, "fairseq-wmt": fairseq_wmt}


@pytest.fixture(autouse=True)
def float64_fairseq_softmax(monkeypatch):
    """fairseq's explicit attention path runs softmax in float32 whatever the model dtype (meant
    for fp16 training); keep it in float64 so a finite-difference check can be exact."""
    import torch.nn.functional as F
    from fairseq import utils

    monkeypatch.setattr(utils, "softmax", lambda x, dim, onnx_trace=False: F.softmax(x, dim=dim))


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_mode_equals_finite_differences(name):
    case = _double(CASES[name]())
    got = helpers.head_importance(case.model, [case.batch], loss_fn=case.loss, normalize=None, progress=False)
    want = fd_example(case)
    assert set(got) == set(case.kinds)
    for kind in case.kinds:
        assert (want[kind] > 1e-6).all()  # every head matters a little on random weights
        torch.testing.assert_close(got[kind], want[kind], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("abs_per", ["example", "token"])
def test_a_loss_that_runs_the_model_twice_per_example(abs_per):
    """A sentence pair's loss encodes each sentence in its own call (chapter 01's paraphrase
    task). Eq. 2's absolute value is of the whole derivative of each example's loss, so the two
    calls' contributions add before it; per token, the two calls' positions are all the example's."""
    case = _double(bert())
    single = case.loss

    def pair_loss(model, batch):  # one loss per example, from two forward passes
        flipped = {**batch, "input_ids": batch["input_ids"].flip(1), "attention_mask": batch["attention_mask"].flip(1)}
        return single(model, batch) * single(model, flipped)

    case.loss = pair_loss
    got = helpers.head_importance(
        case.model, [case.batch], loss_fn=pair_loss, normalize=None, abs_per=abs_per, progress=False
    )
    want = fd_example(case) if abs_per == "example" else fd_token(case, calls=2)
    torch.testing.assert_close(got["self"], want["self"], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("name", ["bert", "fairseq-wmt"])
def test_token_mode_equals_finite_differences(name):
    case = _double(CASES[name]())
    got = helpers.head_importance(
        case.model, [case.batch], loss_fn=case.loss, normalize=None, abs_per="token", progress=False
    )
    want = fd_token(case)
    example = helpers.head_importance(case.model, [case.batch], loss_fn=case.loss, normalize=None, progress=False)
    for kind in case.kinds:
        torch.testing.assert_close(got[kind], want[kind], rtol=1e-6, atol=1e-9)
        # |sum_t| <= sum_t |.|, strictly somewhere: the two estimators really differ
        assert (example[kind] <= got[kind] + 1e-12).all()
        assert (example[kind] < got[kind] - 1e-9).any()


def _split(batch, sizes):
    out, start = [], 0
    for n in sizes:
        out.append({k: v[start : start + n] for k, v in batch.items()})
        start += n
    return out


@pytest.mark.parametrize("abs_per", ["example", "token"])
@pytest.mark.parametrize("build", [bert, fairseq_wmt], ids=["bert", "fairseq-wmt"])
def test_several_batches_equal_their_union(build, abs_per):
    case = _double(build())
    n = next(iter(case.batch.values())).shape[0]
    whole = helpers.head_importance(
        case.model, [case.batch], loss_fn=case.loss, normalize=None, abs_per=abs_per, progress=False
    )
    parts = helpers.head_importance(
        case.model, _split(case.batch, [1, n - 1]), loss_fn=case.loss, normalize=None, abs_per=abs_per, progress=False
    )
    for kind in whole:
        torch.testing.assert_close(parts[kind], whole[kind], rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("abs_per", ["example", "token"])
@pytest.mark.parametrize("build", [bert, fairseq_wmt, llama], ids=["bert", "fairseq-wmt", "llama-gqa"])
def test_per_example_terms_give_the_importance_of_any_subset(build, abs_per):
    """``importance_terms`` keeps one term per example: their mean over all the examples is
    ``head_importance``, and over a subset it is ``head_importance`` run on that subset alone
    (raw and layer-normalized); each example's terms are its own finite-difference importance."""
    from helpers.heads.importance import from_terms, importance_terms
    from helpers.heads.sites import head_grid

    case = _double(build())
    n = next(iter(case.batch.values())).shape[0]
    terms = importance_terms(
        case.model, _split(case.batch, [1, n - 1]), loss_fn=case.loss, abs_per=abs_per, progress=False
    )
    assert {kind: tuple(t.shape) for kind, t in terms.items()} == {
        kind: (n, *shape) for kind, shape in head_grid(case.model).items()
    }
    for normalize in (None, "layer"):
        whole = helpers.head_importance(
            case.model, [case.batch], loss_fn=case.loss, normalize=normalize, abs_per=abs_per, progress=False
        )
        rest = helpers.head_importance(
            case.model,
            _split(case.batch, [1, n - 1])[1:],
            loss_fn=case.loss,
            normalize=normalize,
            abs_per=abs_per,
            progress=False,
        )
        for kind in whole:
            torch.testing.assert_close(
                from_terms(terms, normalize=normalize)[kind], whole[kind], rtol=1e-10, atol=1e-14
            )
            torch.testing.assert_close(
                from_terms(terms, range(1, n), normalize)[kind], rest[kind], rtol=1e-10, atol=1e-14
            )
    first = {k: v[:1] for k, v in case.batch.items()}
    alone = helpers.head_importance(
        case.model, [first], loss_fn=case.loss, normalize=None, abs_per=abs_per, progress=False
    )
    for kind in terms:
        torch.testing.assert_close(terms[kind][0], alone[kind], rtol=1e-10, atol=1e-14)
        assert not torch.equal(terms[kind][0], terms[kind][1])  # examples differ


def test_nothing_accumulates_in_grad_and_training_flag_is_restored():
    case = bert()
    case.model.train()
    helpers.head_importance(case.model, [case.batch, case.batch], loss_fn=case.loss, progress=False)
    assert case.model.training
    assert all(p.grad is None for p in case.model.parameters())


def test_same_inputs_give_the_same_numbers_twice():
    case = bert()
    a = helpers.head_importance(case.model, [case.batch], loss_fn=case.loss, progress=False)
    b = helpers.head_importance(bert().model, [bert().batch], loss_fn=case.loss, progress=False)
    assert torch.equal(a["self"], b["self"])


def test_layer_normalization_gives_unit_rows():
    case = fairseq_wmt()
    raw = helpers.head_importance(case.model, [case.batch], loss_fn=case.loss, normalize=None, progress=False)
    normed = helpers.head_importance(case.model, [case.batch], loss_fn=case.loss, progress=False)
    for kind in raw:
        torch.testing.assert_close(normed[kind].norm(dim=-1), torch.ones(2, dtype=torch.float64))
        torch.testing.assert_close(normed[kind], raw[kind] / raw[kind].norm(dim=-1, keepdim=True))


def test_masked_gates_equal_a_physically_pruned_model():
    """Re-estimating with heads masked (paper's --exact_pruning) gives the pruned model's scores."""
    case = _double(fairseq_wmt())
    spec = {"enc_self": {0: [1]}, "enc_dec": {1: [0, 2]}, "dec_self": {0: [0, 1, 2, 3]}}
    with helpers.HeadGates(case.model) as gates:
        gates.mask(spec)
        masked = helpers.head_importance(
            case.model, [case.batch], loss_fn=case.loss, normalize=None, gates=gates, progress=False
        )
    helpers.prune_heads(case.model, spec)
    pruned = helpers.head_importance(case.model, [case.batch], loss_fn=case.loss, normalize=None, progress=False)
    for kind, layers in spec.items():
        for layer, heads in layers.items():
            assert (pruned[kind][layer, heads] == 0).all()
            masked[kind][layer, heads] = 0.0
        torch.testing.assert_close(pruned[kind], masked[kind], rtol=1e-8, atol=1e-12)


def test_bad_arguments_are_explained():
    case = bert()
    with pytest.raises(ValueError, match="abs_per"):
        helpers.head_importance(case.model, [case.batch], loss_fn=case.loss, abs_per="sentence")
    with pytest.raises(ValueError, match="normalize"):
        helpers.head_importance(case.model, [case.batch], loss_fn=case.loss, normalize="global")
    with pytest.raises(ValueError, match="one loss per example"):
        helpers.head_importance(case.model, [case.batch], loss_fn=lambda m, b: case.loss(m, b).mean(), progress=False)
    with pytest.raises(ValueError, match="no batches"):
        helpers.head_importance(case.model, [], loss_fn=case.loss, progress=False)
