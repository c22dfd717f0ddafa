/* w8a8.c — command-line tool (placeholder main until the CLI lands). */
#include <stdio.h>

#include "w8a8.h"

int main(void) {
  printf("w8a8 %s\n", w8a8_version_string());
  return 0;
}
