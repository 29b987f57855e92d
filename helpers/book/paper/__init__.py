"""What the paper reports: its numbers (``values``), read by the experiments that stand beside
them and by the rules that judge our results against them."""
