"""CPU C for the neural-network row ops: softmax and its kin, the fused losses,
batch normalization."""
