// engine/eng_main.c -- kvfleet-engine: the engine's own command, built also in the standalone
// engine build (-DKVFLEET_ENGINE_ONLY=ON) on hosts that have only a compiler and CUDA.
#include "eng.h"

int main(int argc, char **argv) {
    return eng_cli_main(argc, argv);
}
