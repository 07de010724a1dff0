"""CPU C for pooling: forward, gradients, and the argmax variants."""
