#ifndef TAILOR_WORKER_WORKER_MAIN_H_
#define TAILOR_WORKER_WORKER_MAIN_H_

namespace tailor::worker {

// tailor-worker: one rank of a launcher-started job. Reads its place from the environment
// (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT or SLURM_*), fetches the assignment by lease id,
// joins the c10d group, runs the job kind's handler (RegisterWorkerHandler, plus the
// built-in ones); rank 0 reports to the coordinator. Returns the exit code: 0 ok, 1 failed,
// 2 usage. A library function so a test binary can register a test-only job kind first.
int WorkerMain(int argc, char** argv);

}  // namespace tailor::worker

#endif  // TAILOR_WORKER_WORKER_MAIN_H_
