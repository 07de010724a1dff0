"""CPU C for indexing: basic and advanced subtensors and their increments."""
