#!/usr/bin/env python3
"""Write the golden .npy files npy_test.go compares against, with numpy itself.

Usage: python3 npy/testdata/numpy_golden.py npy/testdata
"""
import os
import sys

import numpy as np


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4028235e38, -1.5], dtype="<f4")
    arrays = {
        "f4_2x3": np.arange(6, dtype="<f4").reshape(2, 3) * np.float32(0.5) - np.float32(1),
        "f4_special": special,
        "f4_scalar": np.array(3.25, dtype="<f4"),
        "f4_empty": np.zeros((0,), dtype="<f4"),
        "f4_2x0": np.zeros((2, 0), dtype="<f4"),
        "f4_1234567x0": np.zeros((1234567, 0), dtype="<f4"),
        "f4_2x3x4": (np.arange(24, dtype="<f4").reshape(2, 3, 4) - np.float32(11)) / np.float32(8),
        "f8_3x2": np.array([[1.0, -2.5], [1e-300, 1e300], [0.1, 3.0]], dtype="<f8"),
        "i4_3": np.array([1, 2, 3], dtype="<i4"),
        "f4be_3": np.array([1, 2, 3], dtype=">f4"),
        "f4_fortran_2x3": np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)),
    }
    for name, a in arrays.items():
        np.save(os.path.join(out, name + ".npy"), a)
    a = arrays["f4_2x3"]
    for version in ((2, 0), (3, 0)):
        with open(os.path.join(out, "f4_2x3_v%d.npy" % version[0]), "wb") as fh:
            np.lib.format.write_array(fh, a, version=version)
    print("numpy", np.__version__, "wrote", len(arrays) + 2, "files to", out)


if __name__ == "__main__":
    main()
