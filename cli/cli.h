// cli/cli.h -- entry points of the kvfleet commands that live in cli/ (one file each; main.c
// dispatches to them by name). Each takes argv with argv[0] = the command's name, parses its
// own options (cli_opts.h), prints its own messages and returns the process exit code:
// 0 ok, 1 the run failed, 2 bad usage or input; plan 3: nothing feasible; validate 3
// inconclusive, 4 failed.
#ifndef CLI_H
#define CLI_H

// kvfleet run SCENARIO ...: one simulation into a result directory (and --explain-step).
int cli_run(int argc, char **argv);
// kvfleet engine profile|serve|fit|info|bench ...: serve and fit here, the rest in engine/.
int cli_engine(int argc, char **argv);
// kvfleet validate --trace T ...: the engine against the simulator on one trace.
int cli_validate(int argc, char **argv);
// kvfleet validate --measured RUN ...: a real benchmark run simulated and compared
// (cli_measured.c).
int cli_validate_measured(int argc, char **argv);
// kvfleet validate: --measured RUN goes to cli_validate_measured, the rest to cli_validate.
int cli_validate_any(int argc, char **argv);
// kvfleet fit --manifest CSV -o FILE ...: system terms fitted to measured runs (cli_fit.c).
int cli_fit(int argc, char **argv);
// kvfleet fit --kernels MANIFEST -o FILE: in-system terms of decode steps fitted to kernel
// times measured inside serving systems (cli_fit_kernels.c).
int cli_fit_kernels(int argc, char **argv);
// kvfleet sweep SCENARIO --vary K=V1,V2 ...: the cross product of the varied keys.
int cli_sweep(int argc, char **argv);
// kvfleet plan SCENARIO --slo ...: the least-cost cluster within the SLOs, or the max rate.
int cli_plan(int argc, char **argv);
// kvfleet hw check FILE: a hardware file's keys and kernel tables are sane.
int cli_hw(int argc, char **argv);
// kvfleet assess TRACE ...: what a shared KV store would do for the trace.
int cli_assess(int argc, char **argv);

#endif
