"""The SpacemiT X60 (SpacemiT K1: in-order, dual issue, RVV 1.0, VLEN 256): its measured instruction costs
(`costs.load_costs`) and the mnemonic classes the cycle model works with (`isa`)."""
