"""CPU C for shape ops and views: dimshuffle, reshape, alloc/eye/arange, joins."""
