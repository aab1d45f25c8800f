#include "tools/bench_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/bench_ops.h"

namespace plexus::bench {
namespace {

std::string JsonEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (static_cast<unsigned char>(c) >= 0x20) out.push_back(c);
  }
  return out;
}

bool Succeeded(const Row& row) { return row.error.empty() && row.wrong == 0 && row.time_us > 0; }

// A row the summaries use: it succeeded, and it is not one of several rounds (their median,
// round 0, stands for them).
bool Usable(const Row& row) { return Succeeded(row) && row.round == 0; }

// Open MPI's rows, from the reference script (--anchor).
bool IsAnchor(const std::string& backend) { return backend.rfind("openmpi-", 0) == 0; }

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// "13.6 / 14.1 / 1912": a time per round, "-" where that round failed.
std::string JoinTimes(const std::vector<double>& times) {
  std::string text;
  for (size_t i = 0; i < times.size(); ++i) {
    char one[32];
    if (times[i] <= 0) {
      snprintf(one, sizeof(one), "-");
    } else {
      snprintf(one, sizeof(one), times[i] < 1000 ? "%.1f" : "%.0f", times[i]);
    }
    text += (i == 0 ? "" : " / ") + std::string(one);
  }
  return text;
}

std::string SizeLabel(int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

// Solves the 3x3 system m * x = v (Gaussian elimination with pivoting); false if singular.
bool Solve3(double m[3][3], double v[3], double x[3]) {
  for (int col = 0; col < 3; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 3; ++r) {
      if (std::fabs(m[r][col]) > std::fabs(m[pivot][col])) pivot = r;
    }
    if (std::fabs(m[pivot][col]) < 1e-30) return false;
    std::swap(m[col], m[pivot]);
    std::swap(v[col], v[pivot]);
    for (int r = 0; r < 3; ++r) {
      if (r == col) continue;
      const double f = m[r][col] / m[col][col];
      for (int c = col; c < 3; ++c) m[r][c] -= f * m[col][c];
      v[r] -= f * v[col];
    }
  }
  for (int i = 0; i < 3; ++i) x[i] = v[i] / m[i][i];
  return true;
}

void Terms(int ranks, int64_t bytes, double t[3]) {
  t[0] = 1;
  t[1] = ranks - 1;
  t[2] = static_cast<double>(bytes) * 2.0 * (ranks - 1) / ranks;
}

}  // namespace

bool WriteJson(const std::string& path, const std::vector<Row>& rows) {
  FILE* json = fopen(path.c_str(), "w");
  if (json == nullptr) return false;
  fprintf(json, "[\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    fprintf(json,
            "  {\"backend\": \"%s\", \"op\": \"%s\", \"ranks\": %d, \"bytes\": %lld, "
            "\"count\": %lld, \"dtype\": \"%s\", \"time_us\": %.3f, \"algbw_gbps\": %.6f, "
            "\"busbw_gbps\": %.6f, \"wrong\": %lld, \"rss_growth_bytes\": %lld, "
            "\"load\": \"%s\", \"model_time_us\": %.3f, \"round\": %d, \"error\": \"%s\"}%s\n",
            r.backend.c_str(), r.op.c_str(), r.ranks, static_cast<long long>(r.bytes),
            static_cast<long long>(r.count), r.dtype.c_str(), r.time_us, r.algbw, r.busbw,
            static_cast<long long>(r.wrong), static_cast<long long>(r.rss_growth),
            JsonEscape(r.load).c_str(), r.model_time_us, r.round, JsonEscape(r.error).c_str(),
            i + 1 < rows.size() ? "," : "");
  }
  fprintf(json, "]\n");
  return fclose(json) == 0;
}

void PrintContention(const std::vector<Row>& rows, FILE* out) {
  using Key = std::tuple<std::string, std::string, int, int64_t>;
  std::map<Key, const Row*> quiet;
  for (const Row& row : rows) {
    if (row.load.empty() && Usable(row) && row.op != "memcpy") {
      quiet[{row.backend, row.op, row.ranks, row.bytes}] = &row;
    }
  }
  bool header = false;
  for (const Row& row : rows) {
    if (row.load.empty() || !Usable(row)) continue;
    auto it = quiet.find({row.backend, row.op, row.ranks, row.bytes});
    if (it == quiet.end()) continue;
    if (!header) {
      fprintf(out, "\n# quiet against under load (time_us; slowdown = loaded / quiet)\n");
      fprintf(out, "%-14s %-12s %5s %10s %-11s %11s %11s %9s\n", "backend", "op", "ranks", "bytes",
              "load", "quiet_us", "loaded_us", "slowdown");
      header = true;
    }
    fprintf(out, "%-14s %-12s %5d %10lld %-11s %11.1f %11.1f %8.2fx\n", row.backend.c_str(),
            row.op.c_str(), row.ranks, static_cast<long long>(row.bytes), row.load.c_str(),
            it->second->time_us, row.time_us, row.time_us / it->second->time_us);
  }
}

void PrintRounds(const std::vector<Row>& rows, FILE* out) {
  // (op, ranks, bytes, load) -> backend -> time per round (0: failed or missing).
  using Case = std::tuple<std::string, int, int64_t, std::string>;
  std::map<Case, std::map<std::string, std::vector<double>>> times;
  int rounds = 0;
  for (const Row& row : rows) rounds = std::max(rounds, row.round);
  if (rounds < 2) return;
  for (const Row& row : rows) {
    if (row.round == 0 || row.op == "memcpy") continue;
    std::vector<double>& per_round = times[{row.op, row.ranks, row.bytes, row.load}][row.backend];
    per_round.resize(rounds, 0);
    per_round[row.round - 1] = Succeeded(row) ? row.time_us : 0;
  }
  fprintf(out,
          "\n# %d rounds, time_us in each (a round measures quiet, then under the load); ahead: "
          "rounds at or below the anchor's time in the same round; loaded / quiet: within a "
          "round, lowest-highest\n",
          rounds);
  fprintf(out, "%-14s %-12s %5s %10s %-10s %-34s %7s %14s\n", "backend", "op", "ranks", "bytes",
          "load", "time_us by round", "ahead", "loaded/quiet");
  for (const auto& [key, by_backend] : times) {
    const auto& [op, ranks, bytes, load] = key;
    const std::vector<double>* anchor = nullptr;
    for (const auto& [backend, per_round] : by_backend) {
      if (IsAnchor(backend)) anchor = &per_round;
    }
    const auto quiet = times.find({op, ranks, bytes, ""});
    for (const auto& [backend, per_round] : by_backend) {
      std::string ahead = "-";
      if (anchor != nullptr && !IsAnchor(backend)) {
        int at_or_below = 0;
        for (int r = 0; r < rounds; ++r) {
          at_or_below += per_round[r] > 0 && (*anchor)[r] > 0 && per_round[r] <= (*anchor)[r];
        }
        ahead = absl::StrCat(at_or_below, "/", rounds);
      }
      std::string slowdown = "-";
      if (!load.empty() && quiet != times.end() && quiet->second.count(backend) != 0) {
        const std::vector<double>& quiet_times = quiet->second.at(backend);
        double low = 0, high = 0;
        for (int r = 0; r < rounds; ++r) {
          if (per_round[r] <= 0 || quiet_times[r] <= 0) continue;
          const double ratio = per_round[r] / quiet_times[r];
          low = low == 0 ? ratio : std::min(low, ratio);
          high = std::max(high, ratio);
        }
        if (high > 0) slowdown = absl::StrFormat("%.2f-%.2fx", low, high);
      }
      fprintf(out, "%-14s %-12s %5d %10lld %-10s %-34s %7s %14s\n", backend.c_str(), op.c_str(),
              ranks, static_cast<long long>(bytes), load.empty() ? "-" : load.c_str(),
              JoinTimes(per_round).c_str(), ahead.c_str(), slowdown.c_str());
    }
  }
}

void AppendMedians(std::vector<Row>& rows) {
  using Case = std::tuple<std::string, std::string, int, int64_t, std::string>;
  std::map<Case, std::vector<const Row*>> rounds;
  for (const Row& row : rows) {
    if (row.round > 0 && Succeeded(row)) {
      rounds[{row.backend, row.op, row.ranks, row.bytes, row.load}].push_back(&row);
    }
  }
  std::vector<Row> medians;
  for (const auto& [key, measured] : rounds) {
    std::vector<double> times;
    for (const Row* row : measured) times.push_back(row->time_us);
    Row median = *measured.front();
    median.round = 0;
    median.time_us = Median(times);
    // Bus bandwidth keeps the op's factor over algorithm bandwidth.
    const double bus_factor = median.algbw > 0 ? median.busbw / median.algbw : 1;
    median.algbw = median.bytes / (median.time_us * 1e3);
    median.busbw = median.algbw * bus_factor;
    median.rss_growth = 0;
    for (const Row* row : measured) {
      median.rss_growth = std::max(median.rss_growth, row->rss_growth);
    }
    medians.push_back(median);
  }
  rows.insert(rows.end(), medians.begin(), medians.end());
}

double CostModel::Time(int ranks, int64_t bytes) const {
  double t[3];
  Terms(ranks, bytes, t);
  return alpha_us * t[0] + alpha_rank_us * t[1] + beta_us_per_byte * t[2];
}

namespace {

using Series = std::pair<std::string, std::string>;  // (backend, op)

// A quiet, usable row of the series: what the model is fitted to and printed against.
bool InSeries(const Row& row, const Series& series) {
  return row.backend == series.first && row.op == series.second && row.load.empty() && Usable(row);
}

// Least squares on relative error: every size weighs alike, not only the largest.
std::optional<CostModel> FitSeries(const std::vector<Row>& rows, const Series& series) {
  double m[3][3] = {}, v[3] = {};
  int points = 0;
  for (const Row& row : rows) {
    if (!InSeries(row, series)) continue;
    double t[3];
    Terms(row.ranks, row.bytes, t);
    const double w = 1.0 / (row.time_us * row.time_us);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) m[i][j] += w * t[i] * t[j];
      v[i] += w * t[i] * row.time_us;
    }
    ++points;
  }
  double x[3];
  if (points < 3 || !Solve3(m, v, x)) return std::nullopt;
  return CostModel{x[0], x[1], x[2], points};
}

// One line per size: measured and fitted time at each rank count.
void PrintSeries(const std::vector<Row>& rows, const Series& series, const std::set<int>& counts,
                 const std::set<int64_t>& sizes, FILE* out) {
  fprintf(out, "\n# %s %s: time_us against ranks (measured / fitted model)\n", series.first.c_str(),
          series.second.c_str());
  fprintf(out, "%8s", "bytes");
  for (int p : counts) fprintf(out, " %19d", p);
  fprintf(out, "\n");
  for (int64_t bytes : sizes) {
    fprintf(out, "%8s", SizeLabel(bytes).c_str());
    for (int p : counts) {
      const Row* found = nullptr;
      for (const Row& row : rows) {
        if (InSeries(row, series) && row.ranks == p && row.bytes == bytes) found = &row;
      }
      if (found == nullptr) {
        fprintf(out, " %19s", "-");
      } else {
        fprintf(out, " %9.1f / %7.1f", found->time_us, found->model_time_us);
      }
    }
    fprintf(out, "\n");
  }
}

}  // namespace

void FitAndPrintScaling(std::vector<Row>& rows, FILE* out) {
  std::map<Series, std::set<int>> rank_counts;
  for (const Row& row : rows) {
    if (row.load.empty() && Usable(row) && row.op != "memcpy" && !TakesNoSize(row.op)) {
      rank_counts[{row.backend, row.op}].insert(row.ranks);
    }
  }
  for (const auto& [series, counts] : rank_counts) {
    if (counts.size() < 2) continue;
    const std::optional<CostModel> model = FitSeries(rows, series);
    if (!model.has_value()) continue;
    std::set<int64_t> sizes;
    for (Row& row : rows) {
      if (InSeries(row, series)) {
        row.model_time_us = model->Time(row.ranks, row.bytes);
        sizes.insert(row.bytes);
      }
    }
    PrintSeries(rows, series, counts, sizes, out);
    // beta as ns per byte, and as the bandwidth it stands for (1 / beta).
    fprintf(out,
            "# model: time_us = %.2f + %.2f * (p - 1) + %.4f ns/B * n * 2(p - 1)/p"
            "  (1/beta = %.3g GB/s; %d points)\n",
            model->alpha_us, model->alpha_rank_us, model->beta_us_per_byte * 1e3,
            model->beta_us_per_byte > 0 ? 1e-3 / model->beta_us_per_byte : 0.0, model->points);
  }
}

}  // namespace plexus::bench
