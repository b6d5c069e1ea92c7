"""What drives the engine: ``verify``'s search, the Hypothesis machine, the
gated background driver, the fuzz harness bodies and the port protocol."""
