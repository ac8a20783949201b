// engine/eng.h -- the real inference engine (placeholder header; see engine/README).
#ifndef ENG_H
#define ENG_H

#include "kvf.h"

// `kvfleet engine profile ...` (argv[0] = "engine"). Returns the exit code.
int eng_cli_main(int argc, char **argv);

#endif
