// apps/cli/main.cpp — jetson-llm (being built up; see issue list).
#include <cstdio>

#include "jllm_version.h"

int main() {
    std::printf("jetson-llm %s (%s)\n", JLLM_VERSION, JLLM_GIT_COMMIT);
    return 0;
}
