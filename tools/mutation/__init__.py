"""Mutation testing of impl/auxstore and the models (docs/mutation.md)."""
