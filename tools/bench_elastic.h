// bench --elastic: the elastic communicator's retry throughput next to the cpu:tcp process
// group, and the time from a SIGKILL to the survivors' completed retry (bench_elastic.cc).
#ifndef PLEXUS_TOOLS_BENCH_ELASTIC_H_
#define PLEXUS_TOOLS_BENCH_ELASTIC_H_

namespace plexus::bench {

// Parses the flags (argv as bench got it, --elastic included), runs, prints; an exit status.
int RunElasticBench(int argc, char** argv);

}  // namespace plexus::bench

#endif  // PLEXUS_TOOLS_BENCH_ELASTIC_H_
