// sim/sim_workload.c -- workload.generate: synthetic traffic streamed like a trace.
#include "sim_run.h"

kvf_status sim_open_generator(const sim_config *cfg, trc_reader **out, kvf_err *err) {
    *out = NULL;
    return kvf_fail(err, KVF_EINVAL, "%s: workload.generate is not available in this build",
                    cfg->path[0] ? cfg->path : "scenario");
}
