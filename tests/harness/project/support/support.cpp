// Our test support library (see support.h).
#include "support/support.h"

#include <cstdlib>
#include <sstream>

std::vector<int> splitStringToInts(const std::string &text, char delimiter) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string field;
  while (std::getline(in, field, delimiter)) {
    char *end = nullptr;
    long value = std::strtol(field.c_str(), &end, 10);
    if (field.empty() || *end != '\0') return {};
    out.push_back(static_cast<int>(value));
  }
  return out;
}

std::string getDB(const std::string &kernel_name, const std::string &shape, int index) {
  return kernel_name + "/run/test_data/matrix_" + shape + "_" + std::to_string(index) + ".txt";
}

bool readMatrix(const char *filename, float *matrix, int &rows, int &cols) {
  FILE *f = std::fopen(filename, "r");
  if (f == nullptr) {
    std::printf("Cannot open file %s\n", filename);
    return false;
  }
  bool ok = std::fscanf(f, "%d %d", &rows, &cols) == 2;
  for (int i = 0; ok && i < rows * cols; ++i) ok = std::fscanf(f, "%f", &matrix[i]) == 1;
  if (!ok) std::printf("Bad matrix data in %s\n", filename);
  std::fclose(f);
  return ok;
}

bool readMatrix(const char *filename, int *matrix, int &rows, int &cols) {
  FILE *f = std::fopen(filename, "r");
  if (f == nullptr) {
    std::printf("Cannot open file %s\n", filename);
    return false;
  }
  bool ok = std::fscanf(f, "%d %d", &rows, &cols) == 2;
  for (int i = 0; ok && i < rows * cols; ++i) ok = std::fscanf(f, "%d", &matrix[i]) == 1;
  if (!ok) std::printf("Bad matrix data in %s\n", filename);
  std::fclose(f);
  return ok;
}
