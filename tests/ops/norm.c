/* tests/ops/norm.c - forward values of the norm op family against numbers computed apart from graphdiet
 * (numpy, PyTorch or ONNX's backend test data), run as part of test_ops. */
#include "helpers.h"

#include <criterion/criterion.h>
