"""Hard-concrete L0 gates (probes/l0_gates.py): the distribution's closed forms against
sampling, and training that prunes more as the penalty grows, on a frozen tiny model."""

import torch
from tiny_models import bert

import helpers
from helpers.probes.l0_gates import ConcreteGates, deterministic, expected_open, sample, train_concrete_gates


def test_expected_open_gates_match_sampling():
    log_alpha = torch.tensor([-3.0, -1.0, 0.0, 1.5, 4.0])
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([sample(log_alpha, g) for _ in range(20000)])
    assert draws.min() >= 0 and draws.max() <= 1
    assert (draws == 0).any() and (draws == 1).any()  # the stretch puts mass on exactly 0 and 1
    open_share = (draws > 0).float().mean(0)
    per_gate = torch.stack([expected_open(a[None]) for a in log_alpha])
    torch.testing.assert_close(open_share, per_gate, atol=0.01, rtol=0)


def test_test_gates_close_below_a_known_threshold():
    # sigmoid(a) * 1.2 - 0.1 <= 0  <=>  sigmoid(a) <= 1/12
    edge = float(torch.logit(torch.tensor(1 / 12)))
    gates = deterministic(torch.tensor([edge - 0.01, edge + 0.01, 10.0]))
    assert gates[0] == 0 and 0 < gates[1] < 0.01 and gates[2] == 1


def tiny_setup():
    case = bert()
    batches = [case.batch]
    loss = lambda m, b: case.loss(m, b).mean()
    return case, batches, loss


def test_no_penalty_keeps_every_head_and_a_large_one_prunes_them_all():
    case, batches, loss = tiny_setup()
    before = case.run(case.model, case.batch)
    params = [p.clone() for p in case.model.parameters()]
    kept = train_concrete_gates(case.model, batches, loss=loss, penalty=0.0, steps=30, progress=False)
    assert kept.pruned(case.model) == {}
    gone = train_concrete_gates(case.model, batches, loss=loss, penalty=50.0, steps=150, progress=False)
    assert sum(len(h) for layers in gone.pruned(case.model).values() for h in layers.values()) == 8
    # the model is left as it was: frozen weights, parameters still trainable, same outputs
    assert all(torch.equal(a, b) for a, b in zip(params, case.model.parameters()))
    assert all(p.requires_grad for p in case.model.parameters())
    assert torch.equal(case.run(case.model, case.batch), before)


def test_larger_penalties_prune_at_least_as_many_heads():
    case, batches, loss = tiny_setup()
    pruned = []
    for penalty in (0.0, 0.5, 2.0, 20.0):
        gates = train_concrete_gates(
            case.model, batches, loss=loss, penalty=penalty, steps=120, seed=1, progress=False
        )
        pruned.append(sum(len(h) for layers in gates.pruned(case.model).values() for h in layers.values()))
    assert pruned == sorted(pruned) and pruned[0] == 0 and pruned[-1] == 8


def test_the_task_gradient_reaches_the_gates():
    """A head that the loss needs keeps a higher log_alpha than one whose removal lowers the loss."""
    case, batches, loss = tiny_setup()
    with torch.no_grad(), helpers.HeadGates(case.model) as gates:
        base = float(loss(case.model, case.batch))
        effect = {}
        for layer in range(2):
            for h in range(4):
                gates.reset()
                gates.mask({"self": {layer: [h]}})
                effect[layer, h] = float(loss(case.model, case.batch)) - base
    trained = train_concrete_gates(
        case.model, batches, loss=loss, penalty=0.0, steps=200, init=0.0, seed=2, progress=False
    )
    worst, best = max(effect, key=effect.get), min(effect, key=effect.get)
    assert effect[worst] > 0 > effect[best]
    assert trained.log_alpha["self"][worst] > trained.log_alpha["self"][best]
    ranking = ConcreteGates(trained.log_alpha, 0.0).ranking(case.model)
    assert ranking.index(("self", *best)) < ranking.index(("self", *worst))
