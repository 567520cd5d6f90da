"""Solve Kepler's equation E - e sin(E) = M for the eccentric anomaly E (seed: fixed-point iteration)."""

import math

WRAP = 6.283185307179586  # mean anomalies are reduced modulo WRAP before solving
MIN_ECC = 1e-09  # orbits less eccentric than this are taken as circular (E = M)
TOL = 0.001  # the iteration stops once a step moves E by less than TOL
MAX_ITER = 100000  # iterations allowed per equation


def solve(mean_anomaly, eccentricity):
    """E with E - eccentricity * sin(E) = mean_anomaly (modulo 2 pi); 0 <= eccentricity < 1."""
    m = mean_anomaly % WRAP
    if eccentricity < MIN_ECC:
        return m
    anomaly = m
    for _ in range(MAX_ITER):
        step = m + eccentricity * math.sin(anomaly) - anomaly
        anomaly += step
        if abs(step) < TOL:
            break
    return anomaly
