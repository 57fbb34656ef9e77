"""Numba kernels: arrays in, arrays out, no Python objects; they trust their inputs.

Their callers check and shape the inputs first: the feature families and tables
(`xlarank.features`), and the reader (`xlarank.data.graph`: narrowing configs to int8 and
hashing them). Each kernel has a plain reference in tests/naive.py that the tests compare
it with.
"""
