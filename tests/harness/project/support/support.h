// Our own small support library with the API shape of Triton_RVV's support/support.h (what their hand-written
// harnesses call): argv parsing, relative data paths, the TXT matrix reader, the accuracy check and the timing
// line. Written for the tests of pytest_rvtune.harness.external; not a copy of theirs.
#pragma once

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

// "8x8x8x3" -> {8, 8, 8, 3}; an empty vector when a field is not a number.
std::vector<int> splitStringToInts(const std::string &text, char delimiter = 'x');

// The relative path of a data file: <kernel_name>/run/test_data/matrix_<shape>_<index>.txt.
std::string getDB(const std::string &kernel_name, const std::string &shape, int index);

// "<rows> <cols>" then rows*cols numbers; rows and cols are set from the file.
bool readMatrix(const char *filename, float *matrix, int &rows, int &cols);
bool readMatrix(const char *filename, int *matrix, int &rows, int &cols);  // their int data (%d)

// Absolute threshold only; prints up to 32 mismatches as "i : want vs got", then "<label> OK|NOT OK".
template <typename T = float>
bool check_tensor(const T *want, const T *got, int n, const char *label, float threshold = 1e-5) {
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    if (!(std::fabs(want[i] - got[i]) <= threshold)) {
      if (wrong < 32) std::cout << i << " : " << want[i] << " vs " << got[i] << std::endl;
      ++wrong;
    }
  }
  std::cout << label << (wrong ? " NOT OK" : " OK") << std::endl;
  return wrong == 0;
}

const std::string TRITON_KERNEL = "Triton Kernel";

#define PRINT_KERNEL_RUNNING_TIME(Kernel, Value) \
  std::cerr << "Running " << (Kernel) << " Average Time: " << (Value) << " s" << std::endl;
