"""Sweeps over sets of heads, built on ``helpers.heads``: each configuration's scores in as few
passes as exactness allows, and the curves and speeds the paper plots.

* ablation.py: mask heads of one configuration after another (§3.2, §3.3), reusing the layers
  below the masked one;
* config_batches.py: many configurations in one pass (row gates on a repeated batch);
* forked.py: a sweep's passes split over forked processes on a CPU;
* sequential.py: a head's class read at two looks at the examples;
* pruning_curves.py: score against the share of heads pruned, in importance, ablation or random
  order (§4.2);
* curve_spread.py: how much a curve's summary moves with the examples it is scored on;
* throughput.py: examples per second and FLOPs, full against pruned (§4.3).
"""
