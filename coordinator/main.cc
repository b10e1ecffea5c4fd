// tailor-coordinator: the only writer of the database; serves the campaign, agent and admin
// APIs (coordinator/coordinator_main.h).
#include "coordinator/coordinator_main.h"

int main(int argc, char** argv) { return tailor::coordinator::CoordinatorMain(argc, argv); }
