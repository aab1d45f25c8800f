// The bench's rows and what it makes of them: the JSON file, the table of times quiet against
// under --load, with --rounds each round against the anchor, and, for a sweep over rank counts,
// time against ranks with a fitted cost model.
#ifndef PLEXUS_TOOLS_BENCH_REPORT_H_
#define PLEXUS_TOOLS_BENCH_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace plexus::bench {

struct Row {
  std::string backend, op;
  int ranks = 0;
  int64_t bytes = 0, count = 0;
  std::string dtype;
  double time_us = 0, algbw = 0, busbw = 0;
  int64_t wrong = 0;
  int64_t rss_growth = 0;  // The largest over ranks.
  std::string error;
  std::string load;          // The --load it ran under ("spin:2"); empty: quiet.
  double model_time_us = 0;  // The fitted cost model's time (rank sweeps); 0: none.
  // --rounds=N: the round it was measured in, from 1; 0: the only round, or the median of all
  // rounds (AppendMedians), which the summaries, the model and the picture use.
  int round = 0;
};

bool WriteJson(const std::string& path, const std::vector<Row>& rows);

// For every row measured both quiet and under a load: both times and their ratio.
void PrintContention(const std::vector<Row>& rows, FILE* out);

// With --rounds: each case's time in every round, how many rounds it was at or ahead of the
// anchor (openmpi-* rows) measured in the same round, and loaded over quiet within a round.
void PrintRounds(const std::vector<Row>& rows, FILE* out);
// Appends, for each case measured in rounds, a row (round 0) with the median time over them.
void AppendMedians(std::vector<Row>& rows);

// The cost model fitted to one (backend, op) over every rank count p and size n it ran at:
//   time = alpha + alpha_rank * (p - 1) + beta * n * 2(p - 1) / p
// (a fixed cost, a per-peer latency, and the bandwidth term of a reduce-scatter/all-gather
// schedule), least squares over the successful quiet rows.
struct CostModel {
  double alpha_us = 0, alpha_rank_us = 0, beta_us_per_byte = 0;
  int points = 0;
  double Time(int ranks, int64_t bytes) const;
};

// With rows at two or more rank counts: fits each (backend, op) (fills model_time_us), prints
// time against ranks per size with the model beside it, and the model's terms.
void FitAndPrintScaling(std::vector<Row>& rows, FILE* out);

}  // namespace plexus::bench

#endif  // PLEXUS_TOOLS_BENCH_REPORT_H_
