// sim/sim_engine_step.c -- engine in the loop: every batch the simulator forms runs on the
// real engine and the measured time becomes the step duration.
#include "sim_run.h"

kvf_status sim_engine_stepper_create(const sim_config *cfg, const mdl_model *m,
                                     const mdl_hardware *hw, const mdl_parallel *par,
                                     const sim_run_opts *o, mdl_stepper **out, kvf_err *err) {
    (void)cfg;
    (void)m;
    (void)hw;
    (void)par;
    *out = NULL;
    return kvf_fail(err, KVF_EINVAL, "--engine %s: engine in the loop is not available in this build",
                    o->engine_backend);
}
