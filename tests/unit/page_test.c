#include "tests/unit/pbtest.h"
int main(void) { return PBT_DONE(); }
