"""Other ways to see what heads do, built on ``helpers.heads`` (chapters 11 and 12).

* induction.py: the repeated-random-tokens probe, induction scores and copying likelihood
  (Olsson et al. 2022);
* l0_gates.py: hard-concrete gates trained with an L0 penalty (Voita et al. 2019), a fourth way
  to choose which heads go.
"""
