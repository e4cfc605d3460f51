#!/usr/bin/python3
"""Fits the polynomials of src/ops/vmath.h (float32 exp, erf and tanh for vectorised kernels).

Least squares on 4000 Chebyshev nodes of each interval, weighted to relative error, in float64;
the coefficients are printed rounded to float32, as vmath.h holds them. tests/test_exec.c
(vmath/accuracy_against_libm_in_double) measures the result against libm in double.

    /usr/bin/python3 tests/bench/fit_vmath.py
"""
import math

import numpy as np


def fit(f, lo, hi, deg, var=lambda x: x):
    k = np.arange(4000)
    x = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / 4000)
    t = var(x)
    a = np.vstack([t**i for i in range(deg + 1)]).T
    w = 1 / np.abs(f(x))
    c, *_ = np.linalg.lstsq(a * w[:, None], f(x) * w, rcond=None)
    return [float(np.float32(v)) for v in c]


erf = np.vectorize(math.erf)
erfc = np.vectorize(math.erfc)
# exp: e^r = 1 + r + r^2 q(r) on |r| <= ln2 / 2
print("exp q(r):", fit(lambda r: (np.expm1(r) - r) / (r * r), -0.35, 0.35, 4))
# erf(x) = x p(x^2) on |x| < 1
print("erf p(x^2):", fit(lambda x: erf(x) / x, 1e-6, 1.0, 6, var=lambda x: x * x))
# erfc(x) = exp(-x^2) g(x - 2.5) on 1 <= x < 4
print("erfc g(x - 2.5):", fit(lambda x: erfc(x) * np.exp(x * x), 1.0, 4.0, 11, var=lambda x: x - 2.5))
# tanh(x) = x p(x^2) on |x| < 0.625
print("tanh p(x^2):", fit(lambda x: np.tanh(x) / x, 1e-6, 0.625, 5, var=lambda x: x * x))

# #52 pow: vmath.h's vm_log2_d and vm_exp2_d (double, for float32 Pow and LRN), Chebyshev fits by
# mpmath at 40 digits, printed as doubles (repr round-trips), with the fit's error:
# log m = 2s + 2s z p(z), z = s^2 <= ((sqrt(2) - 1) / (sqrt(2) + 1))^2; e^r on |r| <= ln2 / 2.
try:
    import mpmath as mp
except ImportError:  # Debian's python3-mpmath
    mp = None
if mp:
    mp.mp.dps = 40
    zmax = ((mp.sqrt(2) - 1) / (mp.sqrt(2) + 1)) ** 2
    c, e = mp.chebyfit(lambda z: (mp.atanh(mp.sqrt(z)) / mp.sqrt(z) - 1) / z if z > 0 else mp.mpf(1) / 3,
                       [0, zmax], 6, error=True)
    print("log2_d 2 p(z), highest first:", [float(2 * v) for v in c], "error of log m 2^%.1f" % float(mp.log(e * zmax, 2)))
    c, e = mp.chebyfit(mp.exp, [-mp.log(2) / 2, mp.log(2) / 2], 10, error=True)
    print("exp2_d e^r, highest first:", [float(v) for v in c], "error 2^%.1f" % float(mp.log(e, 2)))
