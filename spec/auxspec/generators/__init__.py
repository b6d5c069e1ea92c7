"""Generators of inputs: background scenarios and writer schedules."""
