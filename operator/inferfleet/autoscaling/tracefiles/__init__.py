"""The simulator's file edges (I/O): trace files read into a `Trace` (read.py) and a
simulation's plot written as a PNG (plot.py). The replay itself is pure: simulate/."""
