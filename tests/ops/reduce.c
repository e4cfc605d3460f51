/* tests/ops/reduce.c - forward values of the reduce op family against numbers computed apart from graphdiet
 * (numpy, PyTorch or ONNX's backend test data), run as part of test_ops. */
#include "helpers.h"

#include <criterion/criterion.h>
