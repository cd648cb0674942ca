"""Hand-written RVV yardsticks (the C files here) and the code that builds, runs and checks them."""
