"""The model bound to the store's public API: the reference stores, and the
binding of Python values to the model's alphabet. The only part of the spec
that imports ``auxstore``."""
