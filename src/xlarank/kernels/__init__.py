"""Numba kernels: arrays in, arrays out, no validation and no Python objects.

Only `xlarank.features` calls them; it checks and shapes the inputs first. Each kernel has
a plain reference in tests/naive.py that the tests compare it with.
"""
