"""Runners for OpenFGA's own test data against :mod:`core.fga`."""
