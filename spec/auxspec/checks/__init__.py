"""Checks of the spec itself: CrossHair over the model's contracts, the
run-time contract checker, and corruptions that the invariants must catch."""
