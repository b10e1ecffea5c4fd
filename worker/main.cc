// tailor-worker (worker/worker_main.h).
#include "worker/worker_main.h"

int main(int argc, char** argv) { return tailor::worker::WorkerMain(argc, argv); }
